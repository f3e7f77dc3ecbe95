// The reference planner (internal; used by tests only): the same planner with every shortcut of the fast path
// turned off, so that tests can check the fast planner against it plan for plan. p2p steps are priced transfer
// by transfer instead of by transfer classes (transfer_classes.hpp) and collective scratch rank by rank.
#pragma once

#include <optional>

#include "reshard/plan.hpp"
#include "reshard/plan_options.hpp"

namespace reshard::detail {

// make_plan (no rank) or make_rank_plan (a rank), priced the reference way.
Plan make_plan_reference(const Layout& src, const Layout& dst, DType dtype, const PlanOptions& options,
                         std::optional<int> rank = std::nullopt);

}  // namespace reshard::detail
