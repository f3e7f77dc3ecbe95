// A rank's p2p transfers in classes of alike ones, so that pricing costs work per class, not per transfer
// (internal to the planner).
//
// What pricing needs of a transfer (step_geometry.hpp: its bytes, its movement, its scratch) depends on the shapes of
// its region and of the two boxes only, and on whether it crosses a node. Under the overlap rule (overlap.hpp) the
// regions a rank receives are the products, over tensor dims, of its target interval's overlaps with the source's
// chunks (times the contributions of a Partial source), and those it sends are the products of its block's overlaps
// with the target's chunks (times the target's replicas). Grouping each dim's overlaps by (overlap length, chunk
// length) gives a few classes per dim; their product gives the rank's transfer classes with their counts. The
// transfers that stay on the rank's node (its local copy included) are found by asking each rank of the node
// directly (OverlapIndex::sends_to) and counted out of their classes as staying on the node; the rest cross nodes.
//
// A rank thus costs O(prod over dims of its classes per dim + ranks per node), a p2p step O(ranks * that) after an
// O(chunks) table per dim, instead of O(transfers), which is O(ranks^2) for [S0,S0] -> [S1,S1]. The classes apply
// when every block has one holder (the source is Replicate on no mesh dim of size > 1), so that a rank sends to every
// destination overlapping its block; otherwise the pricer enumerates transfers.
#pragma once

#include <utility>
#include <vector>

#include "reshard/overlap.hpp"

namespace reshard::detail {

// `count` transfers whose region has shape `region` and whose other rank's box (the sender's for a receiving rank,
// the receiver's for a sending rank) has shape `other`; offsets are 0.
struct TransferClass {
  Box region, other;
  Index count = 0;
};

class TransferClasses {
 public:
  // Whether `index` is priced by classes (every block has one holder, every layout has one box per rank).
  static bool applies(const OverlapIndex& index);

  // Overlaps of one interval of one side with the other side's chunks, grouped by (overlap length, chunk length).
  struct DimClass {
    Index overlap = 0, chunk = 0, count = 0;
  };
  // Per tensor dim: every chunk combo's DimClasses, back to back, and per combo (row-major over the side's sharding
  // mesh dims) where they lie in it (an empty range for a combo without a chunk).
  struct DimTable {
    std::vector<DimClass> classes;
    std::vector<std::pair<int, int>> of_combo;  // [begin, end) in classes
  };
  using Table = std::vector<DimTable>;
  // The tables' storage, which a caller keeps to reuse (the pricer prices many steps per planning).
  struct Tables {
    Table in, out;
  };

  // Classes of `index`'s transfers, in tables kept in `storage` (overwritten; it must outlive this object).
  TransferClasses(const OverlapIndex& index, Tables& storage);

  // Every transfer into `rank` (its local copy included) in classes; `out` is replaced.
  void incoming(int rank, std::vector<TransferClass>& out) const;
  // Every transfer out of `rank` (its local copy included) in classes; `out` is replaced.
  void outgoing(int rank, std::vector<TransferClass>& out) const;

 private:
  // Fills t (its vectors' memory reused).
  static const Table& table(const Layout& own, const std::vector<OverlapIndex::Chunk>* own_chunks,
                            const std::vector<OverlapIndex::Chunk>* other_chunks, Table& t);
  void product(const Layout& own, const Table& t, int rank, Index multiplicity, std::vector<TransferClass>& out) const;

  const OverlapIndex& index_;
  const Table& in_;     // target intervals against source chunks
  const Table& out_;    // source intervals against target chunks
  Index replicas_ = 1;  // destinations per target box that a sender serves (the target's free dims but kept ones)
};

}  // namespace reshard::detail
