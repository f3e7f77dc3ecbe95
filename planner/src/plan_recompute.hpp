// Plans that come from files: nothing in them is trusted that can be derived from their steps.
#pragma once

#include <functional>

#include "reshard/plan.hpp"
#include "reshard/profile.hpp"

namespace reshard::detail {

// Checks that every p2p step holds exactly the transfers the planner assigns (OverlapIndex: all of them, or for a
// rank-scoped plan those that rank sends or receives): ranks that run their own plans then agree on every message,
// and the step's price is the planner's. kInvalidArgument naming the step and the transfer otherwise.
// The spec must have passed validate_plan.
void check_planner_transfers(const PlanSpec& spec);

// Recomputes the summary from the steps, as the planner computes it: every step's bytes moved (and its estimate when
// `profile` is given; otherwise the step estimates are kept), the plan's estimate (the sum of its steps'), bytes
// moved, peak workspace, the chosen strategy's candidate (added when missing) and every candidate's budget fit.
// kInvalidArgument when the plan's workspace exceeds its memory budget. The spec must have passed validate_plan.
void recompute_summary(PlanSpec& spec, const Profile* profile);

// "S0,S1 -all_gather[1]-> S0,R -> ...": the route of a chain of steps (a candidate's `route`).
std::string route_text(const std::vector<Step>& steps);
// The same for n steps given by step(i) (the planner's priced steps, without copying them).
std::string route_text(size_t n, const std::function<const Step&(size_t)>& step);

}  // namespace reshard::detail
