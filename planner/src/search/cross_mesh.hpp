// Plans between layouts on different meshes of one world of ranks (internal to the planner).
//
// Source and target meshes may differ in shape and in the world ranks they sit on (Mesh::world_size): training on
// (2,4) and serving on (8), pipeline stages on disjoint sub-meshes, a checkpoint moved to another world size. Such a
// plan is one p2p step between world ranks (plus a local step on the target mesh when the target creates Partial
// placements); collectives run on one mesh's groups, so the collective and hybrid candidates are unavailable. Plans
// whose mesh is a subset of the world (same mesh on both sides) are planned here too.
//
// Which rank sends each block is cross_mesh_transfers.hpp's rule.
#pragma once

#include <optional>

#include "reshard/plan.hpp"
#include "reshard/plan_options.hpp"

namespace reshard::detail {

// The plan (global, or for `rank`) between layouts for which needs_cross_mesh holds.
Plan make_cross_mesh_plan(const Layout& src, const Layout& dst, DType dtype, const PlanOptions& options,
                          std::optional<int> rank);

}  // namespace reshard::detail
