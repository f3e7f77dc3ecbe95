// Plan <-> JSON. dump(load(dump(p))) == dump(p): the text round-trips exactly.
//
// Schema (docs/plan-json.md): {"schema": "reshard.plan/1", "global_shape", "dtype", "element_size",
//  "src": {"mesh", "placements"[, "mesh_ranks"]}, "dst": {...}, "ranks_per_node", "profile", "memory_budget_bytes"?,
//  "rank"?, "strategy", "estimated_us", "bytes_moved", "peak_workspace_bytes",
//  "candidates": [{"strategy", "available", "reason"?, "estimated_us", "steps", "bytes_moved",
//                  "peak_workspace_bytes", "fits_budget", "route"}],
//  "steps": [{"kind", "mesh_dims", "from", "to", "estimated_us", "bytes_moved",
//             "transfers": [{"src", "dst", "global_offset", "shape", "bytes"}]  (p2p only)}]}
#pragma once

#include <string>

#include "reshard/plan.hpp"

namespace reshard {

std::string plan_to_json(const Plan& plan);
// Parses and validates (validate_plan); a corrupt or inconsistent document is a kParse / kInvalidArgument error
// naming the field.
Plan plan_from_json(const std::string& text);
Plan load_plan(const std::string& path);

}  // namespace reshard
