// Plans that convert the dtype in the move (planner.hpp's make_converting_plan, with_conversion).
#include "pricing/conversion.hpp"
#include "reshard/planner.hpp"

namespace reshard {

Plan with_conversion(const Plan& plan, DType to_dtype, const PlanOptions& options) {
  RESHARD_REQUIRE(!plan.converts(), "the plan already converts ", to_string(plan.dtype()), " to ",
                  to_string(plan.target_dtype()));
  if (to_dtype == plan.dtype()) return plan;
  validate_conversion(plan.dst(), plan.dtype(), to_dtype);
  PlanSpec spec = plan.spec();
  spec.to_dtype = to_dtype;
  detail::price_conversion(spec, CostModel(options.profile, options.topology, options.low_sm));
  RESHARD_REQUIRE(!spec.memory_budget_bytes || spec.peak_workspace_bytes <= *spec.memory_budget_bytes, "converting ",
                  to_string(spec.dtype), " to ", to_string(to_dtype), " stages the target: the plan needs ",
                  spec.peak_workspace_bytes, " bytes of workspace per rank, over its memory budget of ",
                  *spec.memory_budget_bytes, " bytes");
  return Plan(std::move(spec));
}

namespace {

// A step that converts as it writes the target does not relay (plan.hpp): its relays would forward converted
// elements as unconverted ones.
PlanOptions without_relays(const PlanOptions& options) {
  PlanOptions o = options;
  o.relay = Relay::kNever;
  return o;
}

}  // namespace

Plan make_converting_plan(const Layout& src, const Layout& dst, DType dtype, DType to_dtype,
                          const PlanOptions& options) {
  if (to_dtype == dtype) return make_plan(src, dst, dtype, options);
  validate_conversion(dst, dtype, to_dtype);
  return with_conversion(make_plan(src, dst, dtype, without_relays(options)), to_dtype, options);
}

Plan make_converting_rank_plan(const Layout& src, const Layout& dst, DType dtype, DType to_dtype, int rank,
                               const PlanOptions& options) {
  if (to_dtype == dtype) return make_rank_plan(src, dst, dtype, rank, options);
  validate_conversion(dst, dtype, to_dtype);
  return with_conversion(make_rank_plan(src, dst, dtype, rank, without_relays(options)), to_dtype, options);
}

Plan plan_request(const PlanRequest& req, std::optional<int> rank) {
  return rank ? make_converting_rank_plan(req.src, req.dst, req.dtype, req.to_dtype, *rank, req.options)
              : make_converting_plan(req.src, req.dst, req.dtype, req.to_dtype, req.options);
}

}  // namespace reshard
