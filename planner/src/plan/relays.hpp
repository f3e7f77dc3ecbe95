// Relayed p2p steps (Step::relayed, Transfer::via): the rule that picks which transfers of a step are relayed, and by
// which rank (internal to the planner).
//
// Rule: a relayed step takes its holders per node (HolderSpread::kPerNode: every rank of a node that reads a block
// from another node reads it from one holder), then the transfers from one sender to ranks of another node that
// carry the same region form a group; a
// group of k >= 2 crosses into the node once, to its member at position (sender mod k) in rank order (the relay; the
// senders' groups spread over the node's ranks), and the relay forwards the region to the other k - 1 members. So a
// byte crosses between two nodes at most once per (sender, node) instead of once per receiving rank. Whether a
// transfer is relayed depends only on the transfers from its sender: a rank plan finds its own from the transfers its
// node receives and those it sends.
#pragma once

#include <optional>
#include <vector>

#include "reshard/overlap.hpp"
#include "reshard/plan.hpp"

namespace reshard::detail {

// Sets `via` on the transfers the rule relays (the others keep via -1); the list keeps its order. `transfers`: a
// step's, every transfer of each group present (a whole step's, or every transfer from some senders).
void relay_transfers(std::vector<Transfer>& transfers, const Topology& topology);

// Whether the rule relays any transfer of `transfers` (as relay_transfers would).
bool relays_any(const std::vector<Transfer>& transfers, const Topology& topology);

// A rank plan's transfers of a relayed step: of `node_in` (every transfer into the rank's node) and `from_rank`
// (every transfer it sends), relayed by the rule, those the rank sends, receives or forwards, sorted by (src, dst).
std::vector<Transfer> rank_relayed_transfers(std::vector<Transfer> node_in, std::vector<Transfer> from_rank, int rank,
                                             const Topology& topology);

// Every transfer of the p2p step from `from` to `to` with holders picked as a relayed step picks them
// (HolderSpread::kPerNode), sorted by (src, dst), not yet relayed.
std::vector<Transfer> per_node_transfers(const Layout& from, const Layout& to, const Topology& topology,
                                         int element_size);

// The planner's transfers of a p2p step from `from` to `to` (canonical placements): every rank's, or (`scope`) those
// that rank sends, receives or relays, sorted by (src, dst); with holders per node and relayed by the rule when
// `relayed`. Between meshes (cross_mesh_transfers.hpp) or on one (OverlapIndex, or `index` where the caller holds
// the step's and its spread is the step's), as needs_cross_mesh says.
std::vector<Transfer> planned_transfers(const Layout& from, const Layout& to, const Topology& topology,
                                        int element_size, std::optional<int> scope, bool relayed,
                                        const OverlapIndex* index = nullptr);

}  // namespace reshard::detail
