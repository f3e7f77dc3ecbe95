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
#include "reshard/profile.hpp"

namespace reshard {

std::string plan_to_json(const Plan& plan);
// The plan's "candidates" member alone (a JSON array, as plan_to_json writes it).
std::string candidates_to_json(const Plan& plan);
// Parses and validates a plan as strictly as the planner's own (validate_plan, and p2p transfers exactly the ones the
// planner assigns, for every rank or for a rank-scoped plan's rank); a corrupt or inconsistent document is a kParse /
// kInvalidArgument error naming the field, step or transfer. Summary figures are recomputed from the steps, never
// trusted: bytes moved, peak workspace (refused when over the plan's memory budget), the chosen strategy's candidate
// (`candidates` may be left out) and the plan's estimate. Step estimates are recomputed with `profile` when given,
// else with the default profile when the plan names it, else kept (finite and >= 0).
// Files: regular files of at most 1 GiB (kMaxPlanFileBytes), JSON nested at most 64 deep.
Plan plan_from_json(const std::string& text);
Plan plan_from_json(const std::string& text, const Profile& profile);
Plan load_plan(const std::string& path);
Plan load_plan(const std::string& path, const Profile& profile);

}  // namespace reshard
