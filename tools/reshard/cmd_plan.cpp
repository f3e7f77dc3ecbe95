// reshard plan: candidate plans for a redistribution, their prices, and the winner (table, JSON, SVG).
#include <fstream>
#include <iostream>

#include "cli_common.hpp"
#include "reshard/plan_format.hpp"
#include "reshard/plan_json.hpp"
#include "reshard/planner.hpp"

namespace reshard::cli {

void add_plan_flags(CLI::App& cmd, PlanFlags& flags) {
  add_tensor_flags(cmd, flags.tensor);
  cmd.add_option("--from", flags.from, "Source placements, one per mesh dim (e.g. S0,S1)")->required();
  cmd.add_option("--to", flags.to, "Target placements, one per mesh dim (e.g. S1,S0)")->required();
  cmd.add_option("--dtype", flags.dtype, "Element type: f64 f32 f16 bf16 i64 i32 i8 u8")->capture_default_str();
  cmd.add_option("--strategy", flags.strategy, "auto, collective, p2p or hybrid")->capture_default_str();
  cmd.add_option("--transport", flags.transport,
                 "auto, nccl (two-sided, staged) or nvlink (one-sided peer copies, one host)")
      ->capture_default_str();
  cmd.add_option("--fuse", flags.fuse,
                 "auto, always or never: run an nvlink step's peer copies as one kernel per rank (small tensors)")
      ->capture_default_str();
  cmd.add_option("--ranks-per-node", flags.ranks_per_node, "Ranks (GPUs) per node, for the cost model")
      ->capture_default_str();
  cmd.add_option("--profile", flags.profile, "Cost-model profile JSON (default: built-in H100/H200 + IB400)");
  cmd.add_option("--memory-budget", flags.memory_budget, "Workspace limit per rank in bytes (suffixes KiB, MiB, GiB)");
  cmd.add_option("--max-collectives", flags.max_collectives, "Cap on the collective strategy's communication steps");
  cmd.add_option("--pipeline-chunk", flags.pipeline_chunk,
                 "Pipeline p2p transfers that need packing in chunks of this many bytes (default 0: off)");
}

PlanRequest make_plan_request(const PlanFlags& flags) {
  PlanRequest req{make_layout(flags.tensor, flags.from), make_layout(flags.tensor, flags.to), parse_dtype(flags.dtype),
                  PlanOptions{}};
  req.options.strategy = parse_strategy(flags.strategy);
  req.options.transport = parse_transport(flags.transport);
  req.options.fusion = parse_fusion(flags.fuse);
  RESHARD_REQUIRE(flags.ranks_per_node >= 1, "--ranks-per-node must be >= 1, got ", flags.ranks_per_node);
  req.options.topology.ranks_per_node = flags.ranks_per_node;
  if (!flags.profile.empty()) req.options.profile = load_profile(flags.profile);
  if (!flags.memory_budget.empty())
    req.options.memory_budget_bytes = parse_bytes("--memory-budget", flags.memory_budget);
  if (!flags.pipeline_chunk.empty())
    req.options.pipeline_chunk_bytes = parse_bytes("--pipeline-chunk", flags.pipeline_chunk);
  if (flags.max_collectives != -1) {
    RESHARD_REQUIRE(flags.max_collectives >= 0, "--max-collectives must be >= 0, got ", flags.max_collectives);
    req.options.max_collectives = flags.max_collectives;
  }
  return req;
}

Command add_plan_command(CLI::App& app) {
  struct Flags {
    PlanFlags plan;
    bool json = false;
    std::string svg;
    int rank = -1;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("plan", "Plan a redistribution: candidates, prices, the chosen steps");
  add_plan_flags(*cmd, flags->plan);
  cmd->add_flag("--json", flags->json, "Print the plan as JSON (docs/plan-json.md)");
  cmd->add_option("--svg", flags->svg, "Write a picture of the plan (per-step traffic matrices) to this file");
  cmd->add_option("--rank", flags->rank, "Plan as this rank needs it: only its own transfers");
  return [flags] {
    PlanRequest req = make_plan_request(flags->plan);
    Plan plan = flags->rank >= 0 ? make_rank_plan(req.src, req.dst, req.dtype, flags->rank, req.options)
                                 : make_plan(req.src, req.dst, req.dtype, req.options);
    if (!flags->svg.empty()) {
      std::ofstream out(flags->svg);
      RESHARD_REQUIRE(out.good(), "--svg: cannot write '", flags->svg, "'");
      out << plan_svg(plan);
    }
    std::cout << (flags->json ? plan_to_json(plan) : plan_table(plan));
    return 0;
  };
}

}  // namespace reshard::cli
