// The part of a plan's spec that its request fixes (internal to the planner): what every planner (same mesh, between
// meshes) copies from the caller's layouts, dtype and options, in one place.
#pragma once

#include <optional>

#include "reshard/plan.hpp"
#include "reshard/plan_options.hpp"

namespace reshard::detail {

// The spec of a plan for this request: the layouts, dtype and the options a plan records (topology, profile name,
// memory budget, low-SM mode, changing buffers, the copy-engine row rule), scoped to `rank` where given. The caller
// fills in what it chose: strategy, steps, figures and candidates.
inline PlanSpec request_spec(const Layout& src, const Layout& dst, DType dtype, const PlanOptions& options,
                             std::optional<int> rank) {
  PlanSpec spec;
  spec.src = src;
  spec.dst = dst;
  spec.dtype = dtype;
  spec.topology = options.topology;
  spec.profile_name = options.profile.name;
  spec.memory_budget_bytes = options.memory_budget_bytes;
  spec.scope_rank = rank;
  spec.low_sm = options.low_sm;
  spec.buffers_change = options.buffers_change;
  spec.copy_engine_min_row_bytes = options.profile.nvlink.copy_engine_min_row_bytes;
  return spec;
}

}  // namespace reshard::detail
