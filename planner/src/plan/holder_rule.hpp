// Which holder of a source block sends it to a target rank: the one rule of every p2p step, on one mesh and between
// two (OverlapIndex and cross_mesh_transfers apply it; docs/planner.md states it for readers).
//
// A block's holders are the ranks holding it (its source box and, for a Partial source, its contribution), listed in
// row-major order of their coordinates on the source's Replicate mesh dims; n is their number. A target rank r has a
// position p(r). The block's part of r's target comes from:
//   1. r itself when it holds the block (a local copy);
//   2. otherwise the holder listed at p(r) mod n, when it is on r's node;
//   3. otherwise, of the holders on r's node (in list order), the one at p(r) mod their number;
//   4. otherwise the holder listed at p(r) mod n (HolderSpread::kPerRank), or, for relayed steps
//      (HolderSpread::kPerNode), the holder listed at node(r) mod n: every rank of a node that reads the block from
//      another node reads it from one holder, which the relay rule (relays.hpp) sends into the node once.
// On one mesh p(r) is r's row-major index over the source's Replicate mesh dims, so the holder listed at p(r) is the
// one with r's own coordinates there (the "aligned" holder: every replica serves the targets that share its
// coordinates), and it is r itself whenever r holds the block. Between meshes p(r) is r's row-major position in the
// target mesh.
#pragma once

#include <algorithm>
#include <span>
#include <utility>
#include <vector>

#include "reshard/overlap.hpp"
#include "reshard/plan.hpp"

namespace reshard::detail {

using NodeRank = std::pair<int, int>;  // (node, rank) of a holder

// Every block's holders, grouped by block, each group ordered by node and in list order within a node.
struct BlockHolders {
  std::vector<NodeRank> holders;
  std::vector<Index> begin;  // per block: its first entry in `holders` (size blocks + 1)

  std::span<const NodeRank> of(Index block) const {
    return {holders.data() + begin[block], holders.data() + begin[block + 1]};
  }
};

// The holders of `blocks` blocks of `replicas` holders each: rank_of(block, i) is the block's holder listed at i.
template <class RankOf>
BlockHolders list_holders(Index blocks, Index replicas, const Topology& topology, RankOf rank_of) {
  BlockHolders out;
  out.begin.resize(blocks + 1);
  out.holders.reserve(static_cast<size_t>(blocks * replicas));
  for (Index b = 0; b < blocks; ++b) {
    out.begin[b] = static_cast<Index>(out.holders.size());
    for (Index i = 0; i < replicas; ++i) {
      const int rank = rank_of(b, i);
      out.holders.emplace_back(topology.node_of(rank), rank);
    }
    // By node, keeping list order within a node: a stable insertion sort where a block has few holders
    // (std::stable_sort allocates a buffer per call), std::stable_sort otherwise.
    const auto first = out.holders.begin() + out.begin[b];
    if (out.holders.end() - first <= 32) {
      for (auto i = first + 1; i < out.holders.end(); ++i)
        for (auto j = i; j != first && (j - 1)->first > j->first; --j) std::iter_swap(j - 1, j);
    } else {
      std::stable_sort(first, out.holders.end(),
                       [](const NodeRank& x, const NodeRank& y) { return x.first < y.first; });
    }
  }
  out.begin[blocks] = static_cast<Index>(out.holders.size());
  return out;
}

// The rule above for target rank r: `r_holds` whether r holds the block, `listed` the holder listed at p(r) mod n.
// holders() gives the block's group of BlockHolders and position() p(r); each is called only when rule 3 needs it.
// listed_at(i) gives the holder listed at i < n, called only by rule 4 under kPerNode.
template <class Holders, class Position, class ListedAt>
int pick_holder(int r, bool r_holds, int listed, const Topology& topology, Holders holders, Position position,
                HolderSpread spread, ListedAt listed_at, Index n) {
  if (r_holds) return r;
  if (listed == r || topology.same_node(listed, r)) return listed;
  const int node = topology.node_of(r);
  const auto off_node = [&] { return spread == HolderSpread::kPerNode && n > 1 ? listed_at(node % n) : listed; };
  const std::span<const NodeRank> group = holders();
  if (group.size() <= 1) return off_node();
  const auto lo =
      std::lower_bound(group.begin(), group.end(), node, [](const NodeRank& h, int k) { return h.first < k; });
  const auto hi = std::upper_bound(lo, group.end(), node, [](int k, const NodeRank& h) { return k < h.first; });
  if (lo == hi) return off_node();
  return (lo + static_cast<std::ptrdiff_t>(position() % (hi - lo)))->second;
}

}  // namespace reshard::detail
