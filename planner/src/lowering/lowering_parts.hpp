// One rank's part of a plan before scheduling: each step's copies, stages and one-sided parts with buffer offsets
// assigned (internal to the planner's lowering). lower() schedules them as they are; a batch's lowering
// (lowering_batch.cpp) merges the parts of several plans step by step first.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "lowering/op_schedule.hpp"
#include "reshard/program.hpp"

namespace reshard::detail {

struct LoweredParts {
  RankProgram program;           // everything but the operations
  std::vector<StepParts> steps;  // one per plan step
  // Per plan step: the phases after its first, in order, each run once the one before is done: a relayed step's
  // second phase (Step::relayed); a hierarchical all_reduce's nccl piece and one-sided gather (Step::mixed).
  std::vector<std::vector<StepParts>> later;
};

// Checks the rank against the plan (as lower() does) and lowers every step. `gathers_as_exchanges`: all_gather and
// reduce_scatter steps (but those reducing dims of different ops) become exchanges of the same regions (each member
// sends every other member its part of that member's box; a scatter's receiver reduces the contributions), which a
// batch merges and coalesces with its other tensors' exchanges instead of making one collective call per tensor.
// `one_sided`: who copies in one-sided steps (program.hpp).
LoweredParts lower_parts(const Plan& plan, int rank, bool gathers_as_exchanges = false,
                         OneSidedCopies one_sided = OneSidedCopies::kPull);

// The program's plan facts (RankProgram: identity, maps_peer_tensors, step_signature, step_names) from the plans it
// lowers (one plan, or a batch's) and who copies in one-sided steps.
void set_plan_facts(std::span<const Plan* const> plans, OneSidedCopies copies, RankProgram& prog);

// A program that converts (RankProgram::output_dtype): its copies into an output buffer move to the copy kernel (the
// copy engines cannot convert); kInternal if a receive or a collective writes the output.
void convert_on_kernels(RankProgram& prog);

}  // namespace reshard::detail
