// The route of a chain of steps, as plans and reports show a candidate: "S0,S1 -all_gather[1]-> S0,R -> ...".
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "reshard/plan.hpp"

namespace reshard::detail {

// "S0,S1 -all_gather[1]-> S0,R -> ...": the route of a chain of steps (a candidate's `route`).
std::string route_text(const std::vector<Step>& steps);
// The same for n steps given by step(i) (the planner's priced steps, without copying them).
std::string route_text(size_t n, const std::function<const Step&(size_t)>& step);

}  // namespace reshard::detail
