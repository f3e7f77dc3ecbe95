// The planner: candidate plans for a redistribution, priced by the cost model; the cheapest wins.
//
//   reshard::PlanOptions options;                 // strategy auto, default profile, 8 ranks per node
//   reshard::Plan plan = reshard::make_plan(src, dst, reshard::DType::kBF16, options);
//   std::cout << reshard::plan_table(plan);
//
// Candidates: collective (shortest path over single collectives), p2p (one step of concurrent transfers moving
// the minimum bytes), hybrid (collectives where one serves a mesh dim, one p2p step for the rest). Auto takes
// the cheapest candidate whose peak workspace fits the memory budget. The planner never touches a GPU.
#pragma once

#include <optional>

#include "reshard/plan.hpp"
#include "reshard/plan_options.hpp"

namespace reshard {

// The global plan: p2p steps list every rank's transfers (for inspection, JSON and SVG).
// kInvalidArgument when the layouts differ in mesh or shape, the strategy has no candidate for this
// redistribution, or no candidate fits the memory budget.
Plan make_plan(const Layout& src, const Layout& dst, DType dtype, const PlanOptions& options = {});

// The same plan as one rank needs it: same strategy, steps and prices, but p2p steps hold only the transfers
// this rank sends or receives. Pricing visits every transfer once (each source rank's, enumerated directly);
// nothing quadratic is stored.
Plan make_rank_plan(const Layout& src, const Layout& dst, DType dtype, int rank, const PlanOptions& options = {});

// Plans whose target has dtype `to_dtype` (PlanSpec::to_dtype; equal to `dtype`: the plans above). The conversion is
// checked first (validate_conversion), then the move is planned as above and priced with the receiver's conversion
// (docs/design.md), which is the same for every candidate: the chosen strategy and steps are those of the plain plan.
// Named apart from make_plan: `make_plan(src, dst, dtype, {})` keeps meaning default options.
Plan make_converting_plan(const Layout& src, const Layout& dst, DType dtype, DType to_dtype,
                          const PlanOptions& options = {});
Plan make_converting_rank_plan(const Layout& src, const Layout& dst, DType dtype, DType to_dtype, int rank,
                               const PlanOptions& options = {});
// A plan without conversion made into one that converts into `to_dtype` (as make_converting_plan; `options` give
// the cost model that prices the conversion). Its candidates are completed first (Plan::candidates()).
Plan with_conversion(const Plan& plan, DType to_dtype, const PlanOptions& options = {});

// One redistribution as the front ends (the CLI, the Python bindings) take it from their callers: the layouts, the
// source's element type, the target's (to_dtype equal to dtype: no conversion) and the plan options.
struct PlanRequest {
  Layout src, dst;
  DType dtype;
  DType to_dtype;
  PlanOptions options;
};
// The request's plan: make_converting_plan, or make_converting_rank_plan for `rank`.
Plan plan_request(const PlanRequest& req, std::optional<int> rank = std::nullopt);

}  // namespace reshard
