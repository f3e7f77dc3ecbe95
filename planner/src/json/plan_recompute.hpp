// Plans that come from files: nothing in them is trusted that can be derived from their steps.
#pragma once

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

}  // namespace reshard::detail
