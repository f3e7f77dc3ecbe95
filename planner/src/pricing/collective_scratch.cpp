// Every rank's scratch for a collective step, computed once per class of alike ranks (StepPricer::collective_scratch).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "plan/transitions.hpp"
#include "pricing/step_geometry.hpp"
#include "pricing/step_pricing.hpp"

namespace reshard::detail {
namespace {

// All-gather and reduce-scatter: every member of a group holds the same target box (gather) or source box (scatter),
// so whether the gathered or scattered buffer lies in place is the group's, and a rank adds only whether its own
// chunk does. One pass over the ranks and one walk of each group: O(ranks), where classes of ranks that share a
// scratch could be one per rank (a 1-D mesh's all_gather: every rank its own class, O(ranks^2)). False, `scratch`
// untouched, where some group's members hold different such boxes.
bool shared_box_scratch(const RankBoxes& a, const RankBoxes& b, StepKind kind, std::span<const int> dims, int es,
                        std::vector<Index>& scratch) {
  const Mesh& mesh = a.layout().mesh();
  const int n = a.size();
  if (mesh.size() != n) return false;  // collectives run on a whole world
  const bool gather = kind == StepKind::kAllGather;
  const RankBoxes& shared = gather ? b : a;  // one box per group
  const RankBoxes& chunks = gather ? a : b;  // the members' own chunks
  bool in_group[kMaxDims] = {};
  for (int k : dims) in_group[k] = true;
  int groups = 1;
  for (int k = 0; k < mesh.ndim(); ++k)
    if (!in_group[k]) groups *= mesh.dim_size(k);
  std::vector<int> group_of(n), first(groups, -1);
  std::vector<Index> chunk(groups, 0);
  for (int r = 0; r < n; ++r) {
    const Dims c = mesh.coord_of(r);
    int g = 0;  // the group: the rank's coordinates off `dims`, row-major
    for (int k = 0; k < mesh.ndim(); ++k)
      if (!in_group[k]) g = g * mesh.dim_size(k) + static_cast<int>(c[k]);
    group_of[r] = g;
    if (first[g] < 0) {
      first[g] = r;
    } else if (!(shared[r] == shared[first[g]])) {
      return false;
    }
    chunk[g] = std::max(chunk[g], chunks.volume(r));
  }
  const Index size = mesh.group_size(dims);
  std::vector<char> in_place(groups);
  for (int g = 0; g < groups; ++g) {
    const GroupShape s = gather ? gather_shape(a, b, dims, first[g]) : scatter_shape(a, b, dims, first[g]);
    in_place[g] = gather ? s.recv_in_place : s.send_in_place;
  }
  for (int r = 0; r < n; ++r) {
    const int g = group_of[r];
    const bool own_in_place = chunks.volume(r) == chunk[g];
    CollectiveScratch s;
    (gather ? s.send : s.recv) = own_in_place ? 0 : chunk[g];
    (gather ? s.recv : s.send) = in_place[g] ? 0 : chunk[g] * size;
    scratch[r] = s.total(es);
  }
  return true;
}

}  // namespace

Index StepPricer::rank_collective_scratch(const RankBoxes& a, const RankBoxes& b, StepKind kind,
                                          std::span<const int> dims, int rank) const {
  if (kind == StepKind::kAllToAll)
    return all_to_all_exchange(a, b, dims, rank, exchange_rules(Transport::kNccl, false), model_.topology(),
                               scratch_->exchange, true)
        .scratch()
        .total();
  return detail::collective_scratch(kind, a, b, dims, rank).total(es_);
}

std::vector<Index> StepPricer::collective_scratch(const RankBoxes& a, const RankBoxes& b, StepKind kind,
                                                  std::span<const int> dims) const {
  std::vector<Index> scratch(a.size(), 0);
  if (kind != StepKind::kAllToAll && kind != StepKind::kAllGather && kind != StepKind::kReduceScatter)
    return scratch;  // the other kinds take none
  if (reference_) {
    for (int r = 0; r < a.size(); ++r) scratch[r] = rank_collective_scratch(a, b, kind, dims, r);
    return scratch;
  }
  if (kind != StepKind::kAllToAll && shared_box_scratch(a, b, kind, dims, es_, scratch)) return scratch;
  // A rank's scratch depends only on the shapes of its group's boxes and on where they lie relative to each other.
  // Per tensor dim d: where no mesh dim of the group shards d (in a or b), every member's intervals equal the rank's,
  // so its class records their extents and relative offset; otherwise the members' intervals on d are set by the
  // rank's coordinates on the other mesh dims sharding d ("outer"), and its class records those intervals, shifted to
  // start at 0 (a signature, computed once per outer coordinate), and the rank's own place among the members. Ranks
  // of one class share a scratch: it is computed once per class, O(ranks + classes * group) in all. Keys are rows of
  // one flat table (every rank's key has the same length), found through their hash in an open-addressing table.
  // Every table is the pricer's, kept from call to call and planning to planning (no allocation once they have grown).
  const Layout &la = a.layout(), &lb = b.layout();
  const Mesh& mesh = la.mesh();
  struct DimGroup {
    int outer[kMaxDims], inner[kMaxDims];  // mesh dims sharding d in a or b: off the group, in it
    int n_outer = 0, n_inner = 0;
    Index signature_at = 0;  // where its outer combos' signature ids start in t.signature_of
  };
  DimGroup groups[kMaxDims];
  ScratchTables& t = scratch_->tables;
  // A pricer's first call makes room for a small mesh's classes, one allocation per table (not one per doubling).
  if (t.class_scratch.capacity() == 0) {
    for (std::vector<Index>* v : {&t.signature_of, &t.signatures, &t.signature_start, &t.keys, &t.class_scratch})
      v->reserve(256);
    t.class_hash.reserve(256);
  }
  t.signature_of.clear();
  int key_length = 0;
  for (int d = 0; d < la.ndim(); ++d) {
    DimGroup& g = groups[d];
    for (const Layout* l : {&la, &lb})
      for (int k : l->sharding_mesh_dims(d)) {
        const bool in_group = std::find(dims.begin(), dims.end(), k) != dims.end();
        int* side = in_group ? g.inner : g.outer;
        int& count = in_group ? g.n_inner : g.n_outer;
        if (std::find(side, side + count, k) == side + count) side[count++] = k;
      }
    if (g.n_inner > 0) {
      Index combos = 1;
      for (int i = 0; i < g.n_outer; ++i) combos *= mesh.dim_size(g.outer[i]);
      g.signature_at = static_cast<Index>(t.signature_of.size());
      t.signature_of.resize(t.signature_of.size() + combos, -1);
    }
    key_length += g.n_inner == 0 ? 3 : 1 + g.n_inner;
  }
  t.signatures.clear();       // every signature's intervals, one after the other
  t.signature_start.clear();  // where each begins (one more entry: the end)
  t.signature_start.push_back(0);
  // The rank at a mesh coordinate, whose boxes hold its intervals (a box is the layout's interval per tensor dim,
  // Layout::box_at: read off the boxes rather than computed again).
  Index stride[kMaxDims];
  Index step = 1;
  for (int k = mesh.ndim() - 1; k >= 0; --k) {
    stride[k] = step;
    step *= mesh.dim_size(k);
  }
  auto rank_at = [&](const Dims& c) {
    Index linear = 0;
    for (int k = 0; k < mesh.ndim(); ++k) linear += c[k] * stride[k];
    return mesh.has_explicit_ranks() ? mesh.explicit_ranks()[linear] : static_cast<int>(linear);
  };
  auto signature = [&](int d, const Dims& coord) {
    const DimGroup& g = groups[d];
    Index outer = 0;
    for (int i = 0; i < g.n_outer; ++i) outer = outer * mesh.dim_size(g.outer[i]) + coord[g.outer[i]];
    Index& id = t.signature_of[g.signature_at + outer];
    if (id >= 0) return id;
    const Index begin = static_cast<Index>(t.signatures.size());
    Dims c = coord;
    for (int i = 0; i < g.n_inner; ++i) c[g.inner[i]] = 0;
    Index base = -1;
    while (true) {
      const int r = rank_at(c);
      const Box &x = a[r], &y = b[r];  // la.interval(d, c) and lb.interval(d, c)
      if (base < 0) base = x.offset[d];
      t.signatures.insert(t.signatures.end(), {x.offset[d] - base, x.shape[d], y.offset[d] - base, y.shape[d]});
      int j = g.n_inner - 1;
      while (j >= 0 && ++c[g.inner[j]] == mesh.dim_size(g.inner[j])) c[g.inner[j--]] = 0;
      if (j < 0) break;
    }
    // An equal signature met before keeps its id (signatures are few: a linear search).
    const Index length = static_cast<Index>(t.signatures.size()) - begin;
    const int count = static_cast<int>(t.signature_start.size()) - 1;
    for (int i = 0; i < count; ++i)
      if (t.signature_start[i + 1] - t.signature_start[i] == length &&
          std::equal(t.signatures.begin() + begin, t.signatures.end(), t.signatures.begin() + t.signature_start[i])) {
        t.signatures.resize(begin);
        return id = i;
      }
    t.signature_start.push_back(static_cast<Index>(t.signatures.size()));
    return id = count;
  };
  t.keys.clear();           // the classes' keys, key_length entries each
  t.class_scratch.clear();  // each class's scratch
  t.class_hash.clear();     // each class's key hash
  size_t slots = 16;        // the table of classes: a power of two, at least twice the ranks
  while (slots < 2 * static_cast<size_t>(a.size())) slots *= 2;
  t.slot_class.assign(slots, -1);
  t.key.resize(key_length);
  for (int r = 0; r < a.size(); ++r) {
    const Dims coord = mesh.coord_of(r);
    int i = 0;
    for (int d = 0; d < la.ndim(); ++d) {
      const DimGroup& g = groups[d];
      if (g.n_inner > 0) {
        t.key[i++] = signature(d, coord);
        for (int j = 0; j < g.n_inner; ++j) t.key[i++] = coord[g.inner[j]];
      } else {
        t.key[i++] = a[r].shape[d];
        t.key[i++] = b[r].shape[d];
        t.key[i++] = a[r].offset[d] - b[r].offset[d];
      }
    }
    std::uint64_t h = 1469598103934665603ull;
    for (Index x : t.key) h = (h ^ static_cast<std::uint64_t>(x)) * 1099511628211ull;
    size_t at = (h * 0x9E3779B97F4A7C15ull >> 17) & (slots - 1);
    int c;
    while ((c = t.slot_class[at]) >= 0 &&
           !(t.class_hash[c] == h &&
             std::equal(t.key.begin(), t.key.end(), t.keys.begin() + static_cast<std::ptrdiff_t>(c) * key_length)))
      at = (at + 1) & (slots - 1);
    if (c < 0) {
      c = static_cast<int>(t.class_scratch.size());
      t.slot_class[at] = c;
      t.keys.insert(t.keys.end(), t.key.begin(), t.key.end());
      t.class_hash.push_back(h);
      t.class_scratch.push_back(rank_collective_scratch(a, b, kind, dims, r));
    }
    scratch[r] = t.class_scratch[c];
  }
  return scratch;
}

}  // namespace reshard::detail
