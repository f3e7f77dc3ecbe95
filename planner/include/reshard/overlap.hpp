// P2P overlap regions: which rank sends which region to which rank so that every rank ends up with its target
// box, moving the minimum number of bytes.
//
// The source layout's distinct non-empty boxes ("blocks") are disjoint. For every destination rank r and every
// block overlapping r's target box there is exactly one transfer, of region = block ∩ target(r), from one
// holder of the block, chosen by this rule:
//   1. r itself when it holds the block: a local copy, nothing crosses a link;
//   2. otherwise the aligned holder — the holder with r's own coordinates on the mesh dims where the source is
//      Replicate — when it is on r's node;
//   3. otherwise a holder on r's node, if there is one: of the block's holders on that node, listed in
//      row-major order of their replicated coordinates, the one at position (r's row-major index over the
//      replicated mesh dims) mod (their number), which spreads destinations over them;
//   4. otherwise the aligned holder (HolderSpread::kPerRank); for a relayed step (HolderSpread::kPerNode) the holder
//      listed at (r's node) mod (the block's holders), the same for every rank of r's node, so the relay rule
//      (planner/src/plan/relays.hpp) carries the block into the node once.
// Aligned holders split the destinations of a block evenly between its replicas (each replica serves the
// destinations that share its replicated coordinates), which keeps the busiest sender's volume at its share:
// the balance rule. Every byte a rank needs and does not hold crosses a link exactly once, so the p2p step moves
// the minimum possible number of bytes: sum over r of |target(r)| - |target(r) ∩ source(r)| elements.
//
// Partial sources (partial.hpp): a block is a box together with the contribution it holds. A receiver gets one
// transfer per contribution of every region — the coordinates of the reduced Partial dims, each from a holder with
// those coordinates, chosen by the rules above — and reduces them; on kept Partial dims data moves only between
// ranks with the same coordinate. The step moves no more than a reduce-scatter would: a rank receives each other
// contribution of its target box once.
//
// Both directions can be enumerated for one rank in time proportional to its transfers (O(N) at most), so a rank
// of a large job never materialises all N^2 pairs.
#pragma once

#include <algorithm>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "reshard/partial.hpp"
#include "reshard/plan.hpp"
#include "reshard/rank_boxes.hpp"

namespace reshard {

namespace detail {
class TransferClasses;
}

// Rule 4 above: which holder a rank reads a block from when none is on its node.
enum class HolderSpread { kPerRank, kPerNode };

class OverlapIndex {
 public:
  // Layouts on the same mesh and shape. kInvalidArgument when the target creates a Partial placement, or the
  // reduced Partial dims of the source mix reduce ops.
  OverlapIndex(const Layout& src, const Layout& dst, const Topology& topology, int element_size,
               HolderSpread spread = HolderSpread::kPerRank);
  // The same over rank boxes already built (shared, not copied: on a 16k-rank mesh each is megabytes).
  OverlapIndex(std::shared_ptr<const RankBoxes> src, std::shared_ptr<const RankBoxes> dst, const Topology& topology,
               int element_size, HolderSpread spread = HolderSpread::kPerRank);

  // Transfers into `dst_rank` (its local copy included), appended to `out` in row-major block order.
  void transfers_into(int dst_rank, std::vector<Transfer>& out) const;
  // The first transfer into `dst_rank` (in that order) for which `pred` holds, stopping there.
  std::optional<Transfer> first_transfer_into(int dst_rank, const std::function<bool(const Transfer&)>& pred) const;
  // Transfers out of `src_rank` (its local copy included), appended to `out`.
  void transfers_from(int src_rank, std::vector<Transfer>& out) const;
  // Every transfer, sorted by (src, dst).
  std::vector<Transfer> all_transfers() const;
  // How many all_transfers() holds, counted without holding them (as long to count as to list). Counting stops once
  // the count passes `limit`: a result above `limit` means "more than `limit`", in time O(limit) however many there
  // are.
  size_t transfer_count(size_t limit = std::numeric_limits<size_t>::max()) const;
  // The transfer from `src_rank` to `dst_rank` (the local copy when they are equal), if the rule makes one: a rank
  // holds one block, so there is at most one. O(ndim) plus the holder choice.
  std::optional<Transfer> transfer_between(int src_rank, int dst_rank) const;
  // Whether that transfer exists, with its region's shape written into `shape` (transfer_between without building
  // the transfer: the class pricing asks it for every pair of ranks on a node). Inline: the overlap test, where most
  // pairs are decided.
  bool sends_to(int src_rank, int dst_rank, Dims& shape) const {
    if (src_.volume(src_rank) == 0 || dst_.volume(dst_rank) == 0) return false;
    const Box &from = src_[src_rank], &to = dst_[dst_rank];
    if (shape.size() != from.ndim()) shape = Dims(from.ndim());
    for (int d = 0; d < from.ndim(); ++d) {
      const Index end = std::min(from.offset[d] + from.shape[d], to.offset[d] + to.shape[d]);
      shape[d] = end - std::max(from.offset[d], to.offset[d]);
      if (shape[d] <= 0) return false;
    }
    return (roles_.kept.empty() && src_free_dims_.empty()) || holder_sends_to(src_rank, dst_rank);
  }

  const Layout& src() const { return src_.layout(); }
  const Layout& dst() const { return dst_.layout(); }
  const RankBoxes& src_boxes() const { return src_; }
  const RankBoxes& dst_boxes() const { return dst_; }
  const Topology& topology() const { return topology_; }
  HolderSpread spread() const { return spread_; }
  const PartialRoles& partial_roles() const { return roles_; }

 private:
  friend class detail::TransferClasses;  // prices a rank's transfers by classes of alike ones (transfer_classes.hpp)

  struct Chunk {
    Index begin = 0, size = 0;
    Index combo = 0;   // row-major index over the layout's sharding mesh dims of this tensor dim
    Index linear = 0;  // those coordinates' part of a rank's row-major mesh index
  };
  using ChunkList = std::vector<Chunk>;  // non-empty chunks sorted by begin

  // Calls visit(t) for every transfer into dst_rank in row-major block order while it returns true.
  template <class Visit>
  void visit_into(int dst_rank, Visit visit) const;
  static std::vector<ChunkList> chunk_lists(const RankBoxes& boxes);
  // all_transfers() where every block has one holder.
  std::vector<Transfer> all_transfers_one_holder() const;
  static std::pair<const Chunk*, const Chunk*> overlapping(const ChunkList& list, Index begin, Index end);
  // Writes the coordinates a chunk combo stands for into `coord` (only the sharding mesh dims of dim d).
  void set_combo(const Layout& layout, int d, Index combo, Dims& coord) const;
  // The holder that sends the block whose aligned holder coordinate is `aligned` to rank `dst_rank` (the p2p holder
  // rule, planner/src/plan/holder_rule.hpp).
  int choose_holder(int dst_rank, const Dims& dst_coord, const Dims& aligned) const;
  int rank_at(const Dims& coord) const;
  // sends_to's rule for overlapping boxes where a block has several holders or a Partial dim is kept.
  bool holder_sends_to(int src_rank, int dst_rank) const;
  // Row-major index of a coordinate over the source's sharding mesh dims: identifies a block.
  Index block_of(const Dims& coord) const;

  void init();

  std::shared_ptr<const RankBoxes> src_boxes_, dst_boxes_;
  const RankBoxes& src_ = *src_boxes_;
  const RankBoxes& dst_ = *dst_boxes_;
  Topology topology_;
  int element_size_;
  HolderSpread spread_;
  std::vector<ChunkList> src_chunks_, dst_chunks_;
  std::vector<int> src_free_dims_;  // mesh dims where the source is Replicate (size > 1)
  std::vector<int> dst_free_dims_;
  std::vector<int> src_sharding_dims_;  // mesh dims whose coordinates select a block: Shard, and Partial
  PartialRoles roles_;
  Dims mesh_strides_;                         // row-major strides of the mesh
  std::vector<std::pair<int, int>> holders_;  // (node, rank) of every holder, grouped by block, node-sorted
  std::vector<Index> holders_begin_;          // per block: first entry in holders_ (size blocks + 1)
  Index replicas_ = 1;                        // holders per block: combos over src_free_dims_
};

}  // namespace reshard

namespace reshard {

// The data a redistribution must move, whatever the plan: per rank, bytes in = what it needs and does not hold,
// bytes out = what it sends under the p2p source choice. The link-bandwidth lower bound of any plan is
// max_rank_bytes / (link bandwidth); busbw is max_rank_bytes / time. Layouts on different meshes of one world count
// the transfers of the cross-mesh rule (cross_mesh.hpp in the planner's sources).
struct TrafficBound {
  Index max_rank_bytes = 0;  // max over ranks of max(bytes in, bytes out)
  Index total_bytes = 0;     // summed over ranks (bytes crossing between ranks)
  bool crosses_nodes = false;
};
TrafficBound traffic_bound(const Layout& src, const Layout& dst, const Topology& topology, int element_size);

}  // namespace reshard
