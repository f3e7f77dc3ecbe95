#include "pricing/transfer_classes.hpp"

#include <algorithm>

namespace reshard::detail {
namespace {

Index combo_count(const Mesh& mesh, std::span<const int> dims) {
  Index n = 1;
  for (int k : dims) n *= mesh.dim_size(k);
  return n;
}

Index combo_of(const Mesh& mesh, std::span<const int> dims, const Dims& coord) {
  Index c = 0;
  for (int k : dims) c = c * mesh.dim_size(k) + coord[k];
  return c;
}

}  // namespace

bool TransferClasses::applies(const OverlapIndex& index) {
  return index.src_free_dims_.empty() && index.src().one_box_per_rank() && index.dst().one_box_per_rank();
}

TransferClasses::TransferClasses(const OverlapIndex& index, Tables& storage)
    : index_(index),
      in_(table(index.dst(), index.dst_chunks_.data(), index.src_chunks_.data(), storage.in)),
      out_(table(index.src(), index.src_chunks_.data(), index.dst_chunks_.data(), storage.out)) {
  const Mesh& mesh = index.src().mesh();
  for (int k : index.dst_free_dims_)
    if (std::find(index.roles_.kept.begin(), index.roles_.kept.end(), k) == index.roles_.kept.end())
      replicas_ *= mesh.dim_size(k);
}

const TransferClasses::Table& TransferClasses::table(const Layout& own,
                                                     const std::vector<OverlapIndex::Chunk>* own_chunks,
                                                     const std::vector<OverlapIndex::Chunk>* other_chunks, Table& t) {
  t.resize(own.ndim());
  for (int d = 0; d < own.ndim(); ++d) {
    DimTable& dt = t[d];
    dt.of_combo.assign(combo_count(own.mesh(), own.sharding_mesh_dims(d)), {0, 0});
    dt.classes.clear();
    // Classes are few even where overlapping chunk pairs are many; the tables are kept from step to step (the
    // pricer's working memory), so room is made once.
    if (dt.classes.capacity() < 64) dt.classes.reserve(64);
    for (const OverlapIndex::Chunk& c : own_chunks[d]) {
      auto [first, last] = OverlapIndex::overlapping(other_chunks[d], c.begin, c.begin + c.size);
      const int begin = static_cast<int>(dt.classes.size());
      for (const OverlapIndex::Chunk* o = first; o != last; ++o) {
        const Index overlap = std::min(o->begin + o->size, c.begin + c.size) - std::max(o->begin, c.begin);
        auto same = std::find_if(dt.classes.begin() + begin, dt.classes.end(),
                                 [&](const DimClass& x) { return x.overlap == overlap && x.chunk == o->size; });
        if (same == dt.classes.end())
          dt.classes.push_back(DimClass{overlap, o->size, 1});
        else
          ++same->count;
      }
      dt.of_combo[c.combo] = {begin, static_cast<int>(dt.classes.size())};
    }
  }
  return t;
}

void TransferClasses::product(const Layout& own, const Table& t, int rank, Index multiplicity,
                              std::vector<TransferClass>& out) const {
  const Mesh& mesh = own.mesh();
  const Dims coord = mesh.coord_of(rank);
  const int nd = own.ndim();
  const DimClass* per_dim[kMaxDims];
  int sizes[kMaxDims];
  size_t total = 1;
  for (int d = 0; d < nd; ++d) {
    const auto [begin, end] = t[d].of_combo[combo_of(mesh, own.sharding_mesh_dims(d), coord)];
    if (begin == end) {  // the rank's box is empty: no transfers
      out.clear();
      return;
    }
    per_dim[d] = t[d].classes.data() + begin;
    sizes[d] = end - begin;
    total *= static_cast<size_t>(sizes[d]);
  }
  // The classes are written into `out`'s elements in place: their offsets stay 0 and only shapes and counts change
  // (copying a zeroed pair of boxes per class cost more than the class itself).
  if (!out.empty() && out.front().region.ndim() != nd) out.clear();
  if (out.size() < total)
    out.resize(total, TransferClass{Box{Dims(nd), Dims(nd)}, Box{Dims(nd), Dims(nd)}, 0});
  else
    out.resize(total);
  int at[kMaxDims] = {};
  for (TransferClass& c : out) {
    c.count = multiplicity;
    for (int d = 0; d < nd; ++d) {
      const DimClass& x = per_dim[d][at[d]];
      c.region.shape[d] = x.overlap;
      c.other.shape[d] = x.chunk;
      c.count *= x.count;
    }
    int d = nd - 1;
    while (d >= 0 && ++at[d] == sizes[d]) at[d--] = 0;
  }
}

void TransferClasses::incoming(int rank, std::vector<TransferClass>& out) const {
  product(index_.dst(), in_, rank, index_.roles_.contributions, out);
}

void TransferClasses::outgoing(int rank, std::vector<TransferClass>& out) const {
  product(index_.src(), out_, rank, replicas_, out);
}

}  // namespace reshard::detail
