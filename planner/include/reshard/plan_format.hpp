// Plans for people: a table (steps and their pipeline stages, per-rank traffic, candidates and why the winner won)
// and an SVG picture (per step, a rank x rank matrix of the bytes each rank sends each other rank, in blocks of ranks
// for meshes over 64 ranks; local copies marked; a colour scale). Both are bounded for large meshes: the table lists
// the first ranks and the busiest, and neither builds a rank x rank matrix.
#pragma once

#include <string>

#include "reshard/plan.hpp"

namespace reshard {

std::string plan_table(const Plan& plan);
std::string plan_svg(const Plan& plan);

// "64.0 MiB"
std::string human_bytes(double bytes);

}  // namespace reshard
