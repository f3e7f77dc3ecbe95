// The mapping part of `reshard calibrate`: what changing buffers cost a one-sided step, measured as reshard.torch meets
// them, one process per GPU (ranks of one process share an address space and map nothing).
#pragma once

#include <string>

#include "reshard/profile.hpp"

namespace reshard::cli {

// Runs this executable as `reshard run` on every visible GPU (2 to 8), mesh (n) S0 -> S1 of a 1024x1024 f32 tensor
// on the nvlink transport, with --buffers same, cached and new; with pairs = n (n - 1) (rank, peer it reads) pairs,
// sets profile.nvlink.map_us = (cached - same) / pairs and first_map_us = (new - same) / pairs (0 where negative).
// Returns what it did for the profile's source, or why the fields stay the profile's (fewer than 2 GPUs, no peer
// access). A run that fails or does not finish within `timeout_s` is an error naming it, with its output's tail.
std::string calibrate_mapping(Profile& profile, int iters, int timeout_s);

}  // namespace reshard::cli
