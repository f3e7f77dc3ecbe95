// The transfers of a p2p step between layouts on different meshes of one world of ranks (or on a mesh that is a
// subset of its world).
//
// Transfers: for every target rank r and every source block (a distinct source box and, for a Partial source, the
// contribution it holds: its coordinates on the source's Partial mesh dims) overlapping r's target box, one transfer of
// region = block ∩ target(r) from the holder the p2p rule picks (holder_rule.hpp), r's position being its row-major
// position in the target mesh.
// So ranks only in the source just send, ranks only in the target just receive, ranks in neither do nothing, and
// every target region of a Partial source is the reduction of every contribution (the receiver reduces them, as in a
// same-mesh p2p step from a Partial layout). Replicated target regions are sent from the source holders to every
// target rank that wants them (no two-level broadcast).
#pragma once

#include <optional>
#include <vector>

#include "reshard/overlap.hpp"
#include "reshard/plan.hpp"

namespace reshard::detail {

// Whether a step from `a` to `b` (or a plan from `a` to `b`) is planned between meshes: the meshes differ, or the
// mesh is a subset of its world.
bool needs_cross_mesh(const Layout& a, const Layout& b);

// The p2p step's transfers from `a` to `b` (canonical placements, `b` creating no Partial placement) by the rule
// above: every transfer sorted by (src, dst), or those `scope_rank` sends or receives; `spread` as a relayed step
// (kPerNode) or any other (kPerRank) takes them.
std::vector<Transfer> cross_mesh_transfers(const Layout& a, const Layout& b, const Topology& topology, int element_size,
                                           std::optional<int> scope_rank = std::nullopt,
                                           HolderSpread spread = HolderSpread::kPerRank);

}  // namespace reshard::detail
