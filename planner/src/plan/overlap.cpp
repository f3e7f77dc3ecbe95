#include "reshard/overlap.hpp"

#include <algorithm>

#include "plan/cross_mesh_transfers.hpp"
#include "plan/holder_rule.hpp"
#include "plan/mesh_coords.hpp"

namespace reshard {
namespace {

using detail::combos;
using detail::decode;
using detail::encode;

// Mesh dims (size > 1) whose coordinates select no block: where the layout is Replicate, or (`with_partial`) Partial.
std::vector<int> free_mesh_dims(const Layout& l, bool with_partial) {
  std::vector<int> dims;
  for (int k = 0; k < l.mesh().ndim(); ++k) {
    const Placement& p = l.placement(k);
    if ((p.is_replicate() || (with_partial && p.is_partial())) && l.mesh().dim_size(k) > 1) dims.push_back(k);
  }
  return dims;
}

}  // namespace

OverlapIndex::OverlapIndex(const Layout& src, const Layout& dst, const Topology& topology, int element_size,
                           HolderSpread spread)
    : src_boxes_(std::make_shared<const RankBoxes>(src)),
      dst_boxes_(std::make_shared<const RankBoxes>(dst)),
      topology_(topology),
      element_size_(element_size),
      spread_(spread) {
  init();
}

OverlapIndex::OverlapIndex(std::shared_ptr<const RankBoxes> src, std::shared_ptr<const RankBoxes> dst,
                           const Topology& topology, int element_size, HolderSpread spread)
    : src_boxes_(std::move(src)),
      dst_boxes_(std::move(dst)),
      topology_(topology),
      element_size_(element_size),
      spread_(spread) {
  init();
}

void OverlapIndex::init() {
  const Layout &src = src_.layout(), &dst = dst_.layout();
  const Topology& topology = topology_;
  RESHARD_REQUIRE(src.mesh() == dst.mesh(), "source mesh ", src.mesh().str(), " and target mesh ", dst.mesh().str(),
                  " differ");
  RESHARD_REQUIRE(src.global_shape() == dst.global_shape(), "source shape ", to_string(src.global_shape()),
                  " and target shape ", to_string(dst.global_shape()), " differ");
  const Mesh& mesh = src.mesh();
  roles_ = reshard::partial_roles(mesh, src.placements(), dst.placements());
  RESHARD_REQUIRE(roles_.created.empty(), "p2p steps cannot create Partial placements (target [",
                  to_string(dst.placements()), "] from [", to_string(src.placements()),
                  "]); a local step partitions the value after them");
  RESHARD_REQUIRE(!roles_.mixed_reduce_ops, "a p2p step reduces one op; source [", to_string(src.placements()),
                  "] mixes reduce ops on the mesh dims it reduces");
  src_chunks_ = chunk_lists(src_);
  dst_chunks_ = chunk_lists(dst_);
  src_free_dims_ = free_mesh_dims(src, false);
  dst_free_dims_ = free_mesh_dims(dst, true);
  // A block of a Partial source is a box together with the contribution it holds (its Partial coordinates).
  for (int k = 0; k < mesh.ndim(); ++k)
    if (src.placement(k).is_shard() || (src.placement(k).is_partial() && mesh.dim_size(k) > 1))
      src_sharding_dims_.push_back(k);
  mesh_strides_ = Dims(mesh.ndim(), 1);
  for (int k = mesh.ndim() - 2; k >= 0; --k) mesh_strides_[k] = mesh_strides_[k + 1] * mesh.dim_size(k + 1);
  // Every block's holders, listed in row-major order of their replicated coordinates (holder_rule.hpp).
  Dims coord(mesh.ndim(), 0);
  replicas_ = combos(mesh, src_free_dims_);
  detail::BlockHolders h =
      detail::list_holders(combos(mesh, src_sharding_dims_), replicas_, topology, [&](Index b, Index i) {
        decode(mesh, src_sharding_dims_, b, coord);
        decode(mesh, src_free_dims_, i, coord);
        return rank_at(coord);
      });
  holders_ = std::move(h.holders);
  holders_begin_ = std::move(h.begin);
}

int OverlapIndex::rank_at(const Dims& coord) const {
  Index linear = 0;
  for (int k = 0; k < coord.size(); ++k) linear += coord[k] * mesh_strides_[k];
  const Mesh& mesh = src().mesh();
  return mesh.has_explicit_ranks() ? mesh.explicit_ranks()[linear] : static_cast<int>(linear);
}

Index OverlapIndex::block_of(const Dims& coord) const { return encode(src().mesh(), src_sharding_dims_, coord); }

std::vector<OverlapIndex::ChunkList> OverlapIndex::chunk_lists(const RankBoxes& boxes) {
  const Layout& layout = boxes.layout();
  std::vector<ChunkList> lists(layout.ndim());
  const Mesh& mesh = layout.mesh();
  const Dims strides = row_major_strides(Dims::from(mesh.shape()));
  for (int d = 0; d < layout.ndim(); ++d) {
    const std::span<const int> dims = layout.sharding_mesh_dims(d);
    Index n = combos(mesh, dims);
    lists[d].reserve(n);
    Dims coord(mesh.ndim(), 0);
    for (Index c = 0; c < n; ++c) {
      decode(mesh, dims, c, coord);
      Index linear = 0;  // the coordinate's row-major position (its other mesh coordinates are 0)
      for (int k : dims) linear += coord[k] * strides[k];
      // The interval layout.interval(d, coord), read off the box of the rank there (Layout::box_at).
      const Box& box = boxes[mesh.has_explicit_ranks() ? mesh.explicit_ranks()[linear] : static_cast<int>(linear)];
      if (box.shape[d] == 0) continue;
      lists[d].push_back(Chunk{box.offset[d], box.shape[d], c, linear});
    }
    std::sort(lists[d].begin(), lists[d].end(), [](const Chunk& x, const Chunk& y) { return x.begin < y.begin; });
  }
  return lists;
}

std::pair<const OverlapIndex::Chunk*, const OverlapIndex::Chunk*> OverlapIndex::overlapping(const ChunkList& list,
                                                                                            Index begin, Index end) {
  // Chunks are disjoint and sorted, so their ends are sorted too.
  auto first =
      std::partition_point(list.begin(), list.end(), [&](const Chunk& c) { return c.begin + c.size <= begin; });
  auto last = std::partition_point(first, list.end(), [&](const Chunk& c) { return c.begin < end; });
  return {list.data() + (first - list.begin()), list.data() + (last - list.begin())};
}

void OverlapIndex::set_combo(const Layout& layout, int d, Index combo, Dims& coord) const {
  decode(layout.mesh(), layout.sharding_mesh_dims(d), combo, coord);
}

int OverlapIndex::choose_holder(int dst_rank, const Dims& dst_coord, const Dims& aligned) const {
  // On one mesh the holder listed at p(dst_rank) is the aligned one, and it is dst_rank whenever dst_rank holds the
  // block.
  const int listed = rank_at(aligned);
  if (src_free_dims_.empty()) return listed;  // a block with one holder: that one
  return detail::pick_holder(
      dst_rank, listed == dst_rank, listed, topology_,
      [&] {
        const Index b = block_of(aligned);
        return std::span<const detail::NodeRank>(holders_.data() + holders_begin_[b],
                                                 holders_.data() + holders_begin_[b + 1]);
      },
      [&] { return encode(src().mesh(), src_free_dims_, dst_coord); }, spread_,
      [&](Index i) {  // the holder listed at i: the block's coordinates, the i-th replicated ones
        Dims coord = aligned;
        decode(src().mesh(), src_free_dims_, i, coord);
        return rank_at(coord);
      },
      replicas_);
}

void OverlapIndex::transfers_into(int dst_rank, std::vector<Transfer>& out) const {
  visit_into(dst_rank, [&](const Transfer& t) {
    out.push_back(t);
    return true;
  });
}

size_t OverlapIndex::transfer_count(size_t limit) const {
  size_t n = 0;
  for (int r = 0; r < dst().mesh().world_size() && n <= limit; ++r)
    visit_into(r, [&](const Transfer&) { return ++n <= limit; });
  return n;
}

std::optional<Transfer> OverlapIndex::first_transfer_into(int dst_rank,
                                                          const std::function<bool(const Transfer&)>& pred) const {
  std::optional<Transfer> found;
  visit_into(dst_rank, [&](const Transfer& t) {
    if (pred(t)) found = t;
    return !found;
  });
  return found;
}

template <class Visit>
void OverlapIndex::visit_into(int dst_rank, Visit visit) const {
  const Mesh& mesh = src().mesh();
  Dims dst_coord = mesh.coord_of(dst_rank);
  const Box& target = dst_[dst_rank];
  if (dst_.volume(dst_rank) == 0) return;
  int nd = src().ndim();
  std::pair<const Chunk*, const Chunk*> ranges[kMaxDims];  // no allocation per rank
  for (int d = 0; d < nd; ++d) {
    ranges[d] = overlapping(src_chunks_[d], target.offset[d], target.offset[d] + target.shape[d]);
    if (ranges[d].first == ranges[d].second) return;
  }
  const Chunk* at[kMaxDims];
  for (int d = 0; d < nd; ++d) at[d] = ranges[d].first;
  // The source's sharding mesh dims of every tensor dim with their sizes, to decode chunk combos without calls.
  struct Decoder {
    int n = 0;
    int dims[kMaxDims];
    Index sizes[kMaxDims];
  } decoders[kMaxDims];
  for (int d = 0; d < nd; ++d)
    for (int k : src().sharding_mesh_dims(d)) {
      decoders[d].dims[decoders[d].n] = k;
      decoders[d].sizes[decoders[d].n++] = mesh.shape()[k];
    }
  Dims aligned = dst_coord;
  while (true) {
    Box region{target.shape, target.shape};  // nd entries each, all overwritten below
    for (int d = 0; d < nd; ++d) {
      const Decoder& dec = decoders[d];
      Index combo = at[d]->combo;
      for (int j = dec.n - 1; j >= 0; --j) {
        aligned[dec.dims[j]] = combo % dec.sizes[j];
        combo /= dec.sizes[j];
      }
      Index lo = std::max(at[d]->begin, target.offset[d]);
      Index hi = std::min(at[d]->begin + at[d]->size, target.offset[d] + target.shape[d]);
      region.offset[d] = lo;
      region.shape[d] = hi - lo;
    }
    // One transfer per contribution: every coordinate of the reduced dims (kept dims: the destination's own).
    for (Index c = 0; c < roles_.contributions; ++c) {
      decode(mesh, roles_.reduced, c, aligned);
      int holder = choose_holder(dst_rank, dst_coord, aligned);
      if (!visit(Transfer{holder, dst_rank, region, volume(region) * element_size_})) return;
    }
    int d = nd - 1;
    while (d >= 0 && ++at[d] == ranges[d].second) {
      at[d] = ranges[d].first;
      --d;
    }
    if (d < 0) break;
  }
}

void OverlapIndex::transfers_from(int src_rank, std::vector<Transfer>& out) const {
  const Mesh& mesh = src().mesh();
  Dims src_coord = mesh.coord_of(src_rank);
  const Box& block = src_[src_rank];
  if (src_.volume(src_rank) == 0) return;
  int nd = src().ndim();
  std::pair<const Chunk*, const Chunk*> ranges[kMaxDims];  // no allocation per rank
  for (int d = 0; d < nd; ++d) {
    ranges[d] = overlapping(dst_chunks_[d], block.offset[d], block.offset[d] + block.shape[d]);
    if (ranges[d].first == ranges[d].second) return;
  }
  const Chunk* at[kMaxDims];
  for (int d = 0; d < nd; ++d) at[d] = ranges[d].first;
  Index free_count = combos(mesh, dst_free_dims_);
  Dims dst_coord = src_coord;
  while (true) {
    for (int d = 0; d < nd; ++d) set_combo(dst(), d, at[d]->combo, dst_coord);
    for (Index f = 0; f < free_count; ++f) {
      decode(mesh, dst_free_dims_, f, dst_coord);
      // Kept Partial dims: a contribution stays on its coordinate.
      bool same_contribution = true;
      for (int k : roles_.kept) same_contribution = same_contribution && dst_coord[k] == src_coord[k];
      if (!same_contribution) continue;
      int dst_rank = rank_at(dst_coord);
      // The block's aligned holder for this destination: the block's coordinates on the source's sharding
      // dims, the destination's on the source's replicated dims.
      Dims aligned = src_coord;
      for (int k : src_free_dims_) aligned[k] = dst_coord[k];
      if (choose_holder(dst_rank, dst_coord, aligned) != src_rank) continue;
      Box region = intersect(block, dst_[dst_rank]);
      out.push_back(Transfer{src_rank, dst_rank, region, volume(region) * element_size_});
    }
    int d = nd - 1;
    while (d >= 0 && ++at[d] == ranges[d].second) {
      at[d] = ranges[d].first;
      --d;
    }
    if (d < 0) break;
  }
}

std::optional<Transfer> OverlapIndex::transfer_between(int src_rank, int dst_rank) const {
  Dims shape;
  if (!sends_to(src_rank, dst_rank, shape)) return std::nullopt;
  const Box region = intersect(src_[src_rank], dst_[dst_rank]);
  return Transfer{src_rank, dst_rank, region, volume(region) * element_size_};
}

bool OverlapIndex::holder_sends_to(int src_rank, int dst_rank) const {
  const Mesh& mesh = src().mesh();
  const Dims src_coord = mesh.coord_of(src_rank), dst_coord = mesh.coord_of(dst_rank);
  for (int k : roles_.kept)  // a kept contribution stays on its coordinate
    if (src_coord[k] != dst_coord[k]) return false;
  if (src_free_dims_.empty()) return true;  // the block's one holder sends it everywhere
  // The block's aligned holder for this destination: the block's coordinates everywhere but on the source's
  // replicated dims, the destination's there.
  Dims aligned = src_coord;
  for (int k : src_free_dims_) aligned[k] = dst_coord[k];
  return choose_holder(dst_rank, dst_coord, aligned) == src_rank;
}

std::vector<Transfer> OverlapIndex::all_transfers() const {
  if (src_free_dims_.empty()) return all_transfers_one_holder();
  // The destination side visits each transfer once; the source side would also visit destinations another
  // replica serves. Destinations are visited in rank order, so placing each transfer after those of lower source
  // ranks (a counting sort) orders by (src, dst). Each transfer is enumerated once and moved once, in place.
  const int n = src().mesh().size();
  std::vector<Transfer> all;
  std::vector<size_t> start(n + 1, 0);
  auto add = [&](const Transfer& t) {
    ++start[t.src + 1];
    all.push_back(t);
    return true;
  };
  visit_into(0, add);
  all.reserve(all.size() * static_cast<size_t>(n));  // exact for layouts whose ranks receive alike
  for (int r = 1; r < n; ++r) visit_into(r, add);
  for (int r = 0; r < n; ++r) start[r + 1] += start[r];
  std::vector<size_t> from(all.size());  // from[j]: where the transfer that belongs at j is now
  for (size_t i = 0; i < all.size(); ++i) from[start[all[i].src]++] = i;
  for (size_t i = 0; i < all.size(); ++i) {  // cycle by cycle, each transfer moved once
    if (from[i] == i) continue;
    const Transfer first = all[i];
    size_t j = i;
    while (from[j] != i) {
      const size_t k = from[j];
      all[j] = all[k];
      from[j] = j;
      j = k;
    }
    all[j] = first;
    from[j] = j;
  }
  return all;
}

std::vector<Transfer> OverlapIndex::all_transfers_one_holder() const {
  // A block's one holder sends it to every destination overlapping it (on kept Partial dims: those with its
  // coordinates), so source by source, in rank order, its transfers are the target chunks overlapping its block
  // times the target's free coordinates; each is written once, and a source's few are put in destination order.
  // Destination ranks are sums of the chunks' and the free coordinates' parts of the row-major mesh index.
  const Mesh& mesh = src().mesh();
  const int n = mesh.size(), nd = src().ndim();
  const Index free_count = combos(mesh, dst_free_dims_);
  std::vector<Index> free_linear(free_count), free_kept(free_count);  // per free combo: its part; its kept dims' part
  Dims coord(mesh.ndim(), 0);
  for (Index f = 0; f < free_count; ++f) {
    decode(mesh, dst_free_dims_, f, coord);
    for (int k : dst_free_dims_) free_linear[f] += coord[k] * mesh_strides_[k];
    for (int k : roles_.kept) free_kept[f] += coord[k] * mesh_strides_[k];
  }
  std::vector<Transfer> all;
  auto by_dst = [](const Transfer& x, const Transfer& y) { return x.dst < y.dst; };
  for (int src_rank = 0; src_rank < n; ++src_rank) {
    const Box& block = src_[src_rank];
    if (src_.volume(src_rank) == 0) continue;
    const size_t begin = all.size();
    const Dims src_coord = mesh.coord_of(src_rank);
    Index kept = 0;
    for (int k : roles_.kept) kept += src_coord[k] * mesh_strides_[k];
    std::pair<const Chunk*, const Chunk*> ranges[kMaxDims];
    bool empty = false;
    for (int d = 0; d < nd && !empty; ++d) {
      ranges[d] = overlapping(dst_chunks_[d], block.offset[d], block.offset[d] + block.shape[d]);
      empty = ranges[d].first == ranges[d].second;
    }
    if (empty) continue;
    const Chunk* at[kMaxDims];
    for (int d = 0; d < nd; ++d) at[d] = ranges[d].first;
    Transfer t{src_rank, 0, block, 0};
    while (true) {
      Index linear = 0;
      for (int d = 0; d < nd; ++d) {
        const Chunk& c = *at[d];
        t.region.offset[d] = std::max(c.begin, block.offset[d]);
        t.region.shape[d] = std::min(c.begin + c.size, block.offset[d] + block.shape[d]) - t.region.offset[d];
        linear += c.linear;
      }
      t.bytes = volume(t.region) * element_size_;
      for (Index f = 0; f < free_count; ++f) {
        if (free_kept[f] != kept) continue;  // a kept contribution stays on its coordinate
        const Index at_linear = linear + free_linear[f];
        t.dst = mesh.has_explicit_ranks() ? mesh.explicit_ranks()[at_linear] : static_cast<int>(at_linear);
        all.push_back(t);
      }
      int d = nd - 1;
      while (d >= 0 && ++at[d] == ranges[d].second) {
        at[d] = ranges[d].first;
        --d;
      }
      if (d < 0) break;
    }
    if (all.capacity() == all.size()) all.reserve(all.size() / (src_rank + 1) * n);  // exact where sources send alike
    const auto mine = all.begin() + static_cast<std::ptrdiff_t>(begin);
    if (!std::is_sorted(mine, all.end(), by_dst)) std::sort(mine, all.end(), by_dst);
  }
  return all;
}

}  // namespace reshard

namespace reshard {

TrafficBound traffic_bound(const Layout& src, const Layout& dst, const Topology& topology, int element_size) {
  Layout s = src.with_placements(canonical_placements(src.mesh(), src.placements()));
  Layout d = dst.with_placements(canonical_placements(dst.mesh(), dst.placements()));
  const int n = s.mesh().world_size();
  std::vector<Index> in(n, 0), out(n, 0);
  std::vector<Transfer> buffer;
  TrafficBound b;
  auto count = [&](const std::vector<Transfer>& transfers) {
    for (const Transfer& t : transfers) {
      if (t.is_local()) continue;
      in[t.dst] += t.bytes;
      out[t.src] += t.bytes;
      b.total_bytes += t.bytes;
      b.crosses_nodes = b.crosses_nodes || !topology.same_node(t.src, t.dst);
    }
  };
  if (detail::needs_cross_mesh(s, d)) {  // between meshes: the cross-mesh p2p rule, created Partials partitioned
    const PartialRoles roles = partial_roles(s, d);
    std::vector<Placement> mid = d.placements();
    for (int k : roles.created) mid[k] = Placement::replicate();
    count(detail::cross_mesh_transfers(s, d.with_placements(mid), topology, element_size));
  } else {
    d = d.with_placements(without_created_partials(d.mesh(), s.placements(), d.placements()));  // partitioned locally
    OverlapIndex index(s, d, topology, element_size);
    for (int r = 0; r < n; ++r) {
      buffer.clear();
      index.transfers_into(r, buffer);
      count(buffer);
    }
  }
  for (int r = 0; r < n; ++r) b.max_rank_bytes = std::max({b.max_rank_bytes, in[r], out[r]});
  return b;
}

}  // namespace reshard
