// Plans for people: a table (steps, per-rank traffic, candidates and why the winner won) and an SVG picture
// (per step, a rank x rank matrix of the bytes each rank sends each other rank; local copies marked).
#pragma once

#include <string>

#include "reshard/plan.hpp"

namespace reshard {

std::string plan_table(const Plan& plan);
std::string plan_svg(const Plan& plan);

// "64.0 MiB"
std::string human_bytes(double bytes);

// Logical traffic of one step: bytes[src * n + dst] each rank sends each other rank (local copies on the
// diagonal). For collectives: the data each member contributes to each other member (all_reduce: the ring's
// 2 (n-1)/n share spread evenly).
std::vector<double> step_traffic(const Plan& plan, size_t step);

}  // namespace reshard
