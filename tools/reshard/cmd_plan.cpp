// reshard plan: candidate plans for a redistribution, their prices, and the winner (table, JSON, SVG); or a plan
// from a file (--load), validated and rendered the same way.
#include <fmt/format.h>

#include <optional>

#include "cli_common.hpp"
#include "cli_output.hpp"
#include "reshard/plan_format.hpp"
#include "reshard/plan_json.hpp"
#include "reshard/planner.hpp"

namespace reshard::cli {
namespace {

// Plans listing more transfers than this are not printed as JSON (hundreds of MB, and as much memory to build);
// a rank's own plan (--rank R) is small.
constexpr size_t kMaxJsonTransfers = size_t(1) << 18;

size_t transfer_count(const Plan& plan) {
  size_t n = 0;
  for (const Step& s : plan.steps()) n += s.transfers.size();
  return n;
}

}  // namespace

Command add_plan_command(CLI::App& app) {
  struct Flags {
    PlanFlags plan;
    JsonFlag json;
    std::string svg, load;
    long long rank = -1;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("plan", "Plan a redistribution: candidates, prices, the chosen steps");
  add_plan_flags(*cmd, flags->plan);
  add_json_flag(*cmd, flags->json, "The plan (docs/plan-json.md)");
  cmd->add_option("--svg", flags->svg, "Write a picture of the plan (per-step traffic matrices) to this file");
  cmd->add_option("--rank", flags->rank, "Plan as this rank needs it: only its own transfers");
  cmd->add_option("--load", flags->load,
                  "Read a plan (from plan --json, possibly edited) instead of planning: validate it against the "
                  "layout flags given, then print it like a new one");
  return [flags, cmd] {
    // Outputs first: a file that cannot be written fails before any planning.
    std::optional<Output> svg, json;
    if (!flags->svg.empty()) svg = Output::open(flags->svg, "--svg");
    if (flags->json.given()) json = Output::open(flags->json.path(), "--json");

    std::optional<Plan> plan;
    if (!flags->load.empty()) {
      plan.emplace(load_plan_for(*cmd, flags->plan, flags->load, "--load"));
      if (cmd->count("--rank")) {
        int rank = check_rank("--rank", flags->rank, plan->src().mesh());
        RESHARD_REQUIRE(plan->scope_rank() == rank, "--rank ", rank, " with --load: the plan file is ",
                        plan->scope_rank() ? fmt::format("rank {}'s", *plan->scope_rank()) : std::string("global"),
                        "; make a rank's plan with plan --rank R --json");
      }
    } else {
      PlanRequest req = make_plan_request(*cmd, flags->plan);
      if (cmd->count("--rank")) {
        int rank = check_rank("--rank", flags->rank, req.src.mesh());
        plan.emplace(plan_request(req, rank));
      } else {
        plan.emplace(plan_request(req));
      }
    }
    if (svg) {
      svg->write(plan_svg(*plan));
      svg->flush();
    }
    if (json) {
      size_t transfers = transfer_count(*plan);
      RESHARD_REQUIRE(transfers <= kMaxJsonTransfers, "--json: this plan lists ", transfers,
                      " transfers (the limit for JSON output is ", kMaxJsonTransfers,
                      "); give --rank R for the plan one rank needs");
      json->write(plan_to_json(*plan));
      json->flush();
    }
    if (!json || !json->is_stdout()) Output::standard().write(plan_table(*plan));
    return 0;
  };
}

}  // namespace reshard::cli
