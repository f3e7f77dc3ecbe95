// One rank's part of a plan before scheduling: each step's copies, stages and one-sided parts with buffer offsets
// assigned (internal to the planner's lowering). lower() schedules them as they are; a batch's lowering
// (lowering_batch.cpp) merges the parts of several plans step by step first.
#pragma once

#include <vector>

#include "op_schedule.hpp"
#include "reshard/program.hpp"

namespace reshard::detail {

struct LoweredParts {
  RankProgram program;           // everything but the operations
  std::vector<StepParts> steps;  // one per plan step
};

// Checks the rank against the plan (as lower() does) and lowers every step.
LoweredParts lower_parts(const Plan& plan, int rank);

}  // namespace reshard::detail
