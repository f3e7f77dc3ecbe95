#include "plan/transitions.hpp"

#include <algorithm>
#include <array>

namespace reshard::detail {
namespace {

// Calls f(coord) for every assignment of the mesh dims in `dims` (others left as in `base`).
template <class F>
void for_each_assignment(const Mesh& mesh, std::span<const int> dims, Dims base, F f) {
  for (int d : dims) base[d] = 0;
  while (true) {
    f(base);
    int j = static_cast<int>(dims.size()) - 1;
    while (j >= 0 && ++base[dims[j]] == mesh.shape()[dims[j]]) base[dims[j--]] = 0;
    if (j < 0) return;
  }
}

bool has_empty_interval(const Layout& l) {
  for (int d = 0; d < l.ndim(); ++d) {
    bool empty = false;
    for_each_assignment(l.mesh(), l.sharding_mesh_dims(d), Dims(l.mesh().ndim(), 0),
                        [&](const Dims& c) { empty = empty || l.interval(d, c).size == 0; });
    if (empty || l.global_shape()[d] == 0) return true;
  }
  return false;
}

Index overlap(const Interval& x, const Interval& y) {
  return std::max<Index>(0, std::min(x.end(), y.end()) - std::max(x.begin, y.begin));
}

// Intervals of tensor dim d for every assignment of the mesh dims sharding it, indexed row-major over them. Small
// tables (most meshes) live on the stack, left uninitialised until filled: transition checks run in the planner's
// inner loops.
class IntervalTable {
 public:
  IntervalTable(const Layout& l, int d) {
    size_t i = 0;
    for_each(l, d, [&](const Dims& c) {
      const Interval x = l.interval(d, c);
      data_[i++] = Entry{x.begin, x.size};
    });
  }
  // The same read off the boxes (a box holds every tensor dim's interval, an empty one included).
  IntervalTable(const RankBoxes& boxes, int d) {
    const Layout& l = boxes.layout();
    const Mesh& mesh = l.mesh();
    const std::span<const int> dims = l.sharding_mesh_dims(d);
    reserve(mesh, dims);
    // The group over the sharding dims of the rank at coordinate 0 visits every combination, row-major (walked from
    // row-major position 0, without finding the origin's coordinate first).
    Index stride[kMaxDims];
    mesh_strides(mesh, stride);
    walk_group(mesh, stride, 0, dims, [&](int rank, int j) {
      const Box& b = boxes[rank];
      data_[j] = Entry{b.offset[d], b.shape[d]};
    });
  }
  Interval operator[](Index i) const { return Interval{data_[i].begin, data_[i].size}; }

 private:
  void reserve(const Mesh& mesh, std::span<const int> dims) {
    size_t n = 1;
    for (int k : dims) n *= static_cast<size_t>(mesh.shape()[k]);
    if (n > kInline) {
      heap_.resize(n);
      data_ = heap_.data();
    }
  }
  template <class F>
  void for_each(const Layout& l, int d, F f) {
    const Mesh& mesh = l.mesh();
    const std::span<const int> dims = l.sharding_mesh_dims(d);
    reserve(mesh, dims);
    for_each_assignment(mesh, dims, Dims(mesh.ndim(), 0), f);
  }

  struct Entry {  // an Interval without its default member initialisers (the inline table is not zeroed)
    Index begin, size;
  };
  static constexpr size_t kInline = 64;
  Entry inline_[kInline];
  std::vector<Entry> heap_;
  Entry* data_ = inline_;
};

const Layout& layout_of(const Layout& l) { return l; }
const Layout& layout_of(const RankBoxes& boxes) { return boxes.layout(); }

// A few mesh dims (at most kMaxDims), without allocating.
class DimList {
 public:
  void push_back(int k) { v_[n_++] = k; }
  bool contains(int k) const { return std::find(begin(), end(), k) != end(); }
  const int* begin() const { return v_.data(); }
  const int* end() const { return v_.data() + n_; }
  int* begin() { return v_.data(); }
  int* end() { return v_.data() + n_; }
  std::span<const int> span() const { return {v_.data(), static_cast<size_t>(n_)}; }
  // Ascending (insertion sort: a handful of dims, and no heap code for the compiler to doubt the bounds of).
  void sort() {
    for (int i = 1; i < n_ && i < kMaxDims; ++i)
      for (int j = i; j > 0 && v_[j - 1] > v_[j]; --j) std::swap(v_[j - 1], v_[j]);
  }

 private:
  std::array<int, kMaxDims> v_{};
  int n_ = 0;
};

Index table_index(const Mesh& mesh, std::span<const int> dims, const Dims& coord) {
  Index i = 0;
  for (int k : dims) i = i * mesh.shape()[k] + coord[k];
  return i;
}

// Per tensor dim: every b interval is covered by the union of the a intervals reachable by varying the
// coordinates on `group_dims` (empty: the rank's own a interval).
// `A` and `B`: the layouts, or their boxes (IntervalTable reads either).
template <class A, class B>
bool covered_per_dim(const A& a_side, const B& b_side, std::span<const int> group_dims) {
  const Layout& a = layout_of(a_side);
  const Layout& b = layout_of(b_side);
  const Mesh& mesh = a.mesh();
  for (int d = 0; d < a.ndim(); ++d) {
    const std::span<const int> sa = a.sharding_mesh_dims(d), sb = b.sharding_mesh_dims(d);
    DimList vary, fixed;  // group dims that move the a interval; dims fixed by the rank itself
    for (int k : sb)
      if (!fixed.contains(k)) fixed.push_back(k);
    for (int k : sa) {
      if (std::find(group_dims.begin(), group_dims.end(), k) != group_dims.end())
        vary.push_back(k);
      else if (!fixed.contains(k))
        fixed.push_back(k);
    }
    fixed.sort();
    const IntervalTable ta(a_side, d), tb(b_side, d);
    bool ok = true;
    for_each_assignment(mesh, fixed.span(), Dims(mesh.ndim(), 0), [&](const Dims& c) {
      if (!ok) return;
      const Interval want = tb[table_index(mesh, sb, c)];
      if (want.size == 0) return;
      Index got = 0;
      for_each_assignment(mesh, vary.span(), c,
                          [&](const Dims& g) { got += overlap(ta[table_index(mesh, sa, g)], want); });
      ok = got == want.size;
    });
    if (!ok) return false;
  }
  return true;
}

// Exact check by visiting every rank and every group member.
bool covered_brute_force(const RankBoxes& a, const RankBoxes& b, std::span<const int> group_dims) {
  const Mesh& mesh = a.layout().mesh();
  std::vector<int> group;
  for (int r = 0; r < mesh.size(); ++r) {
    const Box& want = b[r];
    if (b.volume(r) == 0) continue;
    Index got = 0;
    if (group_dims.empty()) {
      got = volume(intersect(a[r], want));
    } else {
      for (int g : mesh.group(r, group_dims)) got += volume(intersect(a[g], want));
    }
    if (got != b.volume(r)) return false;
  }
  return true;
}

std::span<const int> group_dims_of(StepKind kind, std::span<const int> dims) {
  if (kind == StepKind::kAllGather || kind == StepKind::kAllToAll) return dims;
  return {};
}

}  // namespace

std::optional<StepKind> transition_kind(const std::vector<Placement>& from, const std::vector<Placement>& to,
                                        std::span<const int> dims) {
  if (dims.empty()) return std::nullopt;
  std::optional<StepKind> kind;
  for (int k : dims) {
    const Placement &x = from[k], &y = to[k];
    std::optional<StepKind> here;
    if (x.is_shard() && y.is_replicate()) here = StepKind::kAllGather;
    if (x.is_shard() && y.is_shard() && x.dim() != y.dim()) here = StepKind::kAllToAll;
    if (x.is_replicate() && (y.is_shard() || y.is_partial())) here = StepKind::kLocal;
    if (x.is_partial() && y.is_replicate()) here = StepKind::kAllReduce;
    if (x.is_partial() && y.is_shard()) here = StepKind::kReduceScatter;
    if (!here || (kind && *kind != *here)) return std::nullopt;
    if (x.is_partial() && from[dims[0]].op() != x.op()) return std::nullopt;
    kind = here;
  }
  for (int k = 0; k < static_cast<int>(from.size()); ++k)
    if (std::find(dims.begin(), dims.end(), k) == dims.end() && !(from[k] == to[k])) return std::nullopt;
  return kind;
}

bool transition_valid(const Layout& a, const Layout& b, StepKind kind, std::span<const int> dims) {
  const std::span<const int> group_dims = group_dims_of(kind, dims);
  if (covered_per_dim(a, b, group_dims)) return true;
  // A per-dim miss is a real miss unless some b boxes are empty (an empty box needs nothing).
  if (!has_empty_interval(b)) return false;
  return covered_brute_force(RankBoxes(a), RankBoxes(b), group_dims);
}

bool transition_valid(const RankBoxes& a, const RankBoxes& b, StepKind kind, std::span<const int> dims) {
  const std::span<const int> group_dims = group_dims_of(kind, dims);
  if (covered_per_dim(a, b, group_dims)) return true;
  if (!b.any_empty()) return false;
  return covered_brute_force(a, b, group_dims);
}

namespace {

// Whether the non-empty box x lies in `whole` as one contiguous run starting at element `at` of whole's row-major
// local tensor: contains(whole, x) && is_contiguous_in(whole, x) && local_offset(whole, x) == at, in one pass over the
// dims (both boxes are a layout's: their ends fit in int64, and so does x's offset within whole).
bool placed_at(const Box& whole, const Box& x, Index at) {
  const int nd = x.ndim();
  if (whole.ndim() != nd) return false;
  Index offset = 0;
  bool leading = true;  // still in the leading dims where x has extent 1 (the first dim past them may be partial)
  for (int i = 0; i < nd; ++i) {
    const Index lo = x.offset[i] - whole.offset[i];
    if (lo < 0 || lo + x.shape[i] > whole.shape[i]) return false;
    if (!leading && x.shape[i] != whole.shape[i]) return false;
    leading = leading && x.shape[i] == 1;
    offset = offset * whole.shape[i] + lo;
  }
  return offset == at;
}

// Whether the group's boxes, back to back in group order, are exactly `whole` (each one chunk long and contiguous in
// it).
bool back_to_back(const Box& whole, Index whole_volume, const RankBoxes& boxes, int rank, std::span<const int> dims,
                  int members, Index chunk) {
  if (whole_volume != chunk * static_cast<Index>(members)) return false;
  bool ok = true;
  for_each_member(boxes.layout().mesh(), rank, dims, [&](int m, int j) {
    // An empty member (chunk 0) lies anywhere; a non-empty one must be placed at its turn.
    ok = ok && boxes.volume(m) == chunk && (chunk == 0 || placed_at(whole, boxes[m], static_cast<Index>(j) * chunk));
  });
  return ok;
}

}  // namespace

GroupShape gather_shape(const RankBoxes& a, const RankBoxes& b, std::span<const int> dims, int rank) {
  GroupShape g;
  const Mesh& mesh = a.layout().mesh();
  g.size = mesh.group_size(dims);
  for_each_member(mesh, rank, dims, [&](int m, int) { g.chunk = std::max(g.chunk, a.volume(m)); });
  g.send_in_place = a.volume(rank) == g.chunk;
  g.recv_in_place = back_to_back(b[rank], b.volume(rank), a, rank, dims, g.size, g.chunk);
  return g;
}

GroupShape scatter_shape(const RankBoxes& a, const RankBoxes& b, std::span<const int> dims, int rank) {
  GroupShape s;
  const Mesh& mesh = a.layout().mesh();
  s.size = mesh.group_size(dims);
  for_each_member(mesh, rank, dims, [&](int m, int) { s.chunk = std::max(s.chunk, b.volume(m)); });
  s.send_in_place = back_to_back(a[rank], a.volume(rank), b, rank, dims, s.size, s.chunk);
  s.recv_in_place = b.volume(rank) == s.chunk;
  return s;
}

namespace {

// A rank's group over `dims` listed, with the sizes and flags of `shape` (a GatherGeometry or a ScatterGeometry).
template <class Geometry>
Geometry listed(const Mesh& mesh, std::span<const int> dims, int rank, const GroupShape& shape) {
  Geometry g;
  g.group = mesh.group(rank, dims);
  g.index = mesh.group_index(rank, dims);
  g.chunk = shape.chunk;
  g.send_in_place = shape.send_in_place;
  g.recv_in_place = shape.recv_in_place;
  return g;
}

}  // namespace

GatherGeometry gather_geometry(const RankBoxes& a, const RankBoxes& b, std::span<const int> dims, int rank) {
  return listed<GatherGeometry>(a.layout().mesh(), dims, rank, gather_shape(a, b, dims, rank));
}

ScatterGeometry scatter_geometry(const RankBoxes& a, const RankBoxes& b, std::span<const int> dims, int rank) {
  return listed<ScatterGeometry>(a.layout().mesh(), dims, rank, scatter_shape(a, b, dims, rank));
}

int group_size(const Mesh& mesh, std::span<const int> dims) { return mesh.group_size(dims); }

LinkClass group_link(const Mesh& mesh, std::span<const int> dims, const Topology& topology) {
  if (!mesh.has_explicit_ranks()) {
    // Ranks are row-major positions, and nodes hold consecutive ranks: a group spans nodes exactly when its lowest
    // member (every coordinate on `dims` 0) and its highest (every one at its end) are on different nodes.
    const int nd = mesh.ndim();
    Index stride[kMaxDims], span = 0, s = 1;
    for (int k = nd - 1; k >= 0; --k) {
      stride[k] = s;
      s *= mesh.dim_size(k);
    }
    for (int k : dims) span += (mesh.dim_size(k) - 1) * stride[k];
    // The groups of the first coordinate (lowest member 0) and of the last (highest member size - 1).
    const Index last = s - 1;
    if (!topology.same_node(0, static_cast<int>(span)) ||
        !topology.same_node(static_cast<int>(last - span), static_cast<int>(last)))
      return LinkClass::kInterNode;
    return LinkClass::kIntraNode;
  }
  // The members of the groups of the first and last coordinates (mesh.group's order), visited without building lists.
  Dims last(mesh.ndim());
  for (int k = 0; k < mesh.ndim(); ++k) last[k] = mesh.dim_size(k) - 1;
  for (int r : {mesh.rank_at(Dims(mesh.ndim())), mesh.rank_at(last)}) {
    int front = -1;
    bool spans = false;
    for_each_member(mesh, r, dims, [&](int m, int) {
      if (front < 0) front = m;
      spans = spans || !topology.same_node(m, front);
    });
    if (spans) return LinkClass::kInterNode;
  }
  return LinkClass::kIntraNode;
}

}  // namespace reshard::detail
