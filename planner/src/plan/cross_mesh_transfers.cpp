#include "plan/cross_mesh_transfers.hpp"

#include <algorithm>
#include <span>

#include "plan/holder_rule.hpp"
#include "plan/mesh_coords.hpp"

namespace reshard::detail {
namespace {

// The source side of the transfer rule: blocks, their holders, and per tensor dim the source's chunks.
class CrossOverlap {
 public:
  CrossOverlap(const Layout& a, const Layout& b, const Topology& topology, int element_size, HolderSpread spread)
      : a_(a), b_(b), topology_(topology), es_(element_size), spread_(spread) {
    const Mesh& m = a.mesh();
    for (int k = 0; k < m.ndim(); ++k) {
      if (m.dim_size(k) == 1) continue;
      (a.placement(k).is_replicate() ? free_dims_ : block_dims_).push_back(k);
      if (a.placement(k).is_partial()) partial_dims_.push_back(k);
    }
    contributions_ = combos(m, partial_dims_);
    chunks_.resize(a.ndim());
    for (int d = 0; d < a.ndim(); ++d) {
      const std::span<const int> dims = a.sharding_mesh_dims(d);
      Dims coord(m.ndim(), 0);
      for (Index c = 0, n = combos(m, dims); c < n; ++c) {
        decode(m, dims, c, coord);
        const Interval iv = a.interval(d, coord);
        if (iv.size > 0) chunks_[d].push_back(Chunk{iv.begin, iv.size, c});
      }
      std::sort(chunks_[d].begin(), chunks_[d].end(), [](const Chunk& x, const Chunk& y) { return x.begin < y.begin; });
    }
    replicas_ = combos(m, free_dims_);
    Dims coord(m.ndim(), 0);
    holders_ = list_holders(combos(m, block_dims_), replicas_, topology, [&](Index blk, Index i) {
      decode(m, block_dims_, blk, coord);
      decode(m, free_dims_, i, coord);
      listed_.push_back(m.rank_at(coord));  // called in (block, i) order
      return listed_.back();
    });
  }

  // Appends every transfer into world rank `r`, in row-major block order.
  void into(int r, std::vector<Transfer>& out) const {
    const Mesh &ma = a_.mesh(), &mb = b_.mesh();
    if (!mb.contains(r)) return;
    const Box target = b_.box(r);
    if (volume(target) == 0) return;
    const Index own_block = ma.contains(r) ? encode(ma, block_dims_, ma.coord_of(r)) : -1;
    const Index position = encode(mb, all_dims(mb), mb.coord_of(r));
    const int nd = a_.ndim();
    std::vector<std::pair<const Chunk*, const Chunk*>> ranges(nd);
    for (int d = 0; d < nd; ++d) {
      const std::vector<Chunk>& list = chunks_[d];
      const Index lo = target.offset[d], hi = target.offset[d] + target.shape[d];
      auto first =
          std::partition_point(list.begin(), list.end(), [&](const Chunk& c) { return c.begin + c.size <= lo; });
      auto last = std::partition_point(first, list.end(), [&](const Chunk& c) { return c.begin < hi; });
      if (first == last) return;
      ranges[d] = {list.data() + (first - list.begin()), list.data() + (last - list.begin())};
    }
    std::vector<const Chunk*> at(nd);
    for (int d = 0; d < nd; ++d) at[d] = ranges[d].first;
    Dims coord(ma.ndim(), 0);
    while (true) {
      Box region{Dims(nd), Dims(nd)};
      for (int d = 0; d < nd; ++d) {
        decode(ma, a_.sharding_mesh_dims(d), at[d]->combo, coord);
        const Index lo = std::max(at[d]->begin, target.offset[d]);
        const Index hi = std::min(at[d]->begin + at[d]->size, target.offset[d] + target.shape[d]);
        region.offset[d] = lo;
        region.shape[d] = hi - lo;
      }
      for (Index c = 0; c < contributions_; ++c) {
        decode(ma, partial_dims_, c, coord);
        const Index blk = encode(ma, block_dims_, coord);
        out.push_back(Transfer{holder(blk, r, own_block, position), r, region, volume(region) * es_});
      }
      int d = nd - 1;
      while (d >= 0 && ++at[d] == ranges[d].second) {
        at[d] = ranges[d].first;
        --d;
      }
      if (d < 0) break;
    }
  }

 private:
  struct Chunk {
    Index begin = 0, size = 0;
    Index combo = 0;  // row-major index over the source's sharding mesh dims of this tensor dim
  };

  static std::vector<int> all_dims(const Mesh& m) {
    std::vector<int> dims(m.ndim());
    for (int k = 0; k < m.ndim(); ++k) dims[k] = k;
    return dims;
  }

  // The source rank holding block `blk` listed at i (row-major over the source's Replicate mesh dims).
  int listed(Index blk, Index i) const { return listed_[static_cast<size_t>(blk * replicas_ + i)]; }

  // holder_rule.hpp with p(r) = r's row-major position in the target mesh.
  int holder(Index blk, int r, Index own_block, Index position) const {
    return pick_holder(
        r, blk == own_block, blk == own_block ? r : listed(blk, position % replicas_), topology_,
        [&] { return holders_.of(blk); }, [&] { return position; }, spread_, [&](Index i) { return listed(blk, i); },
        replicas_);
  }

  const Layout& a_;
  const Layout& b_;
  Topology topology_;
  int es_;
  HolderSpread spread_;
  std::vector<int> block_dims_, free_dims_, partial_dims_;
  Index contributions_ = 1;
  std::vector<std::vector<Chunk>> chunks_;
  Index replicas_ = 1;       // holders per block
  std::vector<int> listed_;  // per block, its holders in list order
  BlockHolders holders_;
};

}  // namespace

bool needs_cross_mesh(const Layout& a, const Layout& b) {
  return !(a.mesh() == b.mesh()) || a.mesh().world_size() != a.mesh().size();
}

std::vector<Transfer> cross_mesh_transfers(const Layout& a, const Layout& b, const Topology& topology, int element_size,
                                           std::optional<int> scope_rank, HolderSpread spread) {
  const CrossOverlap overlap(a, b, topology, element_size, spread);
  const int n = a.mesh().world_size();
  std::vector<Transfer> all;
  for (int r = 0; r < n; ++r) {
    // A rank-scoped plan keeps the rank's receives and its sends (found among every receiver's transfers).
    const size_t begin = all.size();
    overlap.into(r, all);
    if (scope_rank && r != *scope_rank)
      all.erase(std::remove_if(all.begin() + static_cast<std::ptrdiff_t>(begin), all.end(),
                               [&](const Transfer& t) { return t.src != *scope_rank; }),
                all.end());
    // Bounded as they are listed: at most one receiver's transfers past the limit are ever held.
    RESHARD_REQUIRE(all.size() <= kMaxPlanTransfers, "the p2p step from mesh ", a.mesh().str(), " to mesh ",
                    b.mesh().str(), " lists more than ", kMaxPlanTransfers,
                    " transfers, the most a plan holds (plan one rank's part: --rank R, make_rank_plan)");
  }
  std::stable_sort(all.begin(), all.end(), [](const Transfer& x, const Transfer& y) { return x.src < y.src; });
  return all;
}

}  // namespace reshard::detail
