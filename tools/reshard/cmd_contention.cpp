// reshard contention: a redistribution and back-to-back GEMMs on the same GPUs at once (gemm_contention.hpp): each
// one's time alone and beside the other, and the slowdowns (beside / alone - 1), every element of the redistribution
// verified.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli_common.hpp"
#include "cli_output.hpp"
#include "reshard/gemm_contention.hpp"
#include "reshard/plan_format.hpp"
#include "reshard/text.hpp"

namespace reshard::cli {
namespace {

struct ContentionFlags {
  PlanFlags plan;
  std::string gemm = "8192x8192x8192:bf16";
  std::string transports;
  int repeats = 5;
  int iters = 50;
  int warmup = 3;
  int timeout_ms = 120000;
  bool cuda_graph = false;
  JsonFlag json;
};

std::string percent(double fraction) { return fmt::format("{:+.1f}%", 100.0 * fraction); }

std::string report_table(const PlanRequest& req, const std::vector<Plan>& plans,
                         const std::vector<ContentionResult>& results) {
  const ContentionResult& first = results.front();
  const Plan& p = plans.front();
  const double tensor_bytes = static_cast<double>(volume(whole(p.src().global_shape()))) * p.element_size();
  std::string out = fmt::format(
      "# reshard contention: mesh {}, {} -> {}, {} {} ({}), beside GEMM {} ({} GEMMs per loop, {} repeats{}{})\n",
      p.src().mesh().str(), to_string(req.src.placements()), to_string(req.dst.placements()),
      to_string(p.src().global_shape()), to_string(p.dtype()), human_bytes(tensor_bytes), to_string(first.gemm),
      first.gemms_per_loop, first.repeats, first.cuda_graph ? ", replayed from CUDA graphs" : ", enqueued eagerly",
      p.low_sm() ? ", planned in low-SM mode" : "");
  out +=
      "# times per GEMM / per redistribution (us): medians over the repeats of the slowest rank; "
      "slowdown = beside / alone - 1\n";
  out += fmt::format("{:<11} {:<9} {:>12} {:>13} {:>9} {:>14} {:>15} {:>9} {:>9} {:>6}\n", "strategy", "transport",
                     "gemm_alone", "gemm_beside", "gemm_+%", "redist_alone", "redist_beside", "redist_+%", "redists",
                     "wrong");
  for (size_t i = 0; i < results.size(); ++i) {
    const ContentionResult& r = results[i];
    out +=
        fmt::format("{:<11} {:<9} {:>12.1f} {:>13.1f} {:>9} {:>14.1f} {:>15.1f} {:>9} {:>9} {:>6}\n",
                    to_string(plans[i].strategy()), to_string(plans[i].transport()), r.gemm_alone_us, r.gemm_beside_us,
                    percent(r.gemm_slowdown), r.redistribution_alone_us, r.redistribution_beside_us,
                    percent(r.redistribution_slowdown), r.redistributions_per_loop, r.wrong_elements);
  }
  for (size_t i = 0; i < results.size(); ++i) {
    const ContentionResult& r = results[i];
    out += fmt::format(
        "# {}: GEMM {:.0f} TFLOP/s alone; overlapped loops: GEMMs {:.0f} us, {} redistributions {:.0f} us; verified "
        "{} elements on {} ranks: {}\n",
        to_string(plans[i].transport()), r.gemm_alone_us > 0 ? gemm_flops(r.gemm) / (r.gemm_alone_us * 1e6) : 0.0,
        r.gemm_loop_beside_us, r.redistributions_per_loop, r.redistribution_loop_beside_us, r.checked_elements, r.ranks,
        r.wrong_elements == 0 ? std::string("all correct") : fmt::format("{} WRONG", r.wrong_elements));
  }
  return out;
}

std::string report_json(const std::vector<Plan>& plans, const std::vector<ContentionResult>& results) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (size_t i = 0; i < results.size(); ++i) {
    const Plan& p = plans[i];
    const ContentionResult& r = results[i];
    rows.push_back({{"mesh", p.src().mesh().str()},
                    {"from", to_string(p.src().placements())},
                    {"to", to_string(p.dst().placements())},
                    {"shape", to_string(p.src().global_shape())},
                    {"dtype", std::string(to_string(p.dtype()))},
                    {"strategy", std::string(to_string(p.strategy()))},
                    {"transport", std::string(to_string(p.transport()))},
                    {"cuda_graph", r.cuda_graph},
                    {"low_sm", p.low_sm()},
                    {"tensor_bytes", volume(whole(p.src().global_shape())) * p.element_size()},
                    {"gemm", to_string(r.gemm)},
                    {"gemms_per_loop", r.gemms_per_loop},
                    {"redistributions_per_loop", r.redistributions_per_loop},
                    {"repeats", r.repeats},
                    {"gemm_alone_us", r.gemm_alone_us},
                    {"gemm_beside_us", r.gemm_beside_us},
                    {"gemm_slowdown", r.gemm_slowdown},
                    {"redistribution_alone_us", r.redistribution_alone_us},
                    {"redistribution_beside_us", r.redistribution_beside_us},
                    {"redistribution_slowdown", r.redistribution_slowdown},
                    {"gemm_loop_beside_us", r.gemm_loop_beside_us},
                    {"redistribution_loop_beside_us", r.redistribution_loop_beside_us},
                    {"gemm_alone_samples_us", r.gemm_alone_samples},
                    {"gemm_beside_samples_us", r.gemm_beside_samples},
                    {"redistribution_alone_samples_us", r.redistribution_alone_samples},
                    {"redistribution_beside_samples_us", r.redistribution_beside_samples},
                    {"wrong", r.wrong_elements},
                    {"checked", r.checked_elements},
                    {"workspace_bytes", r.workspace_bytes},
                    {"ranks", r.ranks}});
  }
  return nlohmann::ordered_json{{"rows", rows}}.dump(1) + "\n";
}

}  // namespace

Command add_contention_command(CLI::App& app) {
  auto flags = std::make_shared<ContentionFlags>();
  CLI::App* cmd = app.add_subcommand(
      "contention", "Run a redistribution beside back-to-back GEMMs on the same GPUs; report both slowdowns, verified");
  cmd->alias("overlap");  // its former name
  add_plan_flags(*cmd, flags->plan);
  cmd->add_option("--gemm", flags->gemm, "GEMM C = A B as MxNxK[:dtype], dtype bf16 (default), f16 or f32")
      ->capture_default_str();
  cmd->add_option("--transports", flags->transports,
                  "Several transports in one run, comma-separated (nccl,nvlink): one row each (instead of "
                  "--transport)");
  cmd->add_option("--repeats", flags->repeats, "Repeats of the three phases; the figures are their medians (>= 5)")
      ->capture_default_str();
  cmd->add_option("--iters", flags->iters, "GEMMs per loop (the redistributions per loop are sized to match)")
      ->capture_default_str();
  cmd->add_option("--warmup", flags->warmup, "Untimed GEMMs and redistributions first")->capture_default_str();
  cmd->add_flag("--cuda-graph,--graph", flags->cuda_graph,
                "Capture one redistribution and one GEMM into CUDA graphs and time their replays (verified as eager)");
  cmd->add_option("--timeout-ms", flags->timeout_ms,
                  "Abort with an error when one phase (or a wait for the other ranks) takes longer than this")
      ->capture_default_str();
  add_json_flag(*cmd, flags->json, "The result");
  return [flags, cmd] {
    const ContentionFlags& f = *flags;
    ContentionOptions options;
    options.gemm = parse_gemm_spec(f.gemm, "--gemm");
    options.repeats = f.repeats;
    options.gemms = f.iters;
    options.warmup = f.warmup;
    options.cuda_graph = f.cuda_graph;
    RESHARD_REQUIRE(f.timeout_ms >= 1, "--timeout-ms must be >= 1, got ", f.timeout_ms);
    options.timeout = std::chrono::milliseconds(f.timeout_ms);
    check_contention_options(options);
    std::vector<Transport> transports;
    if (cmd->count("--transports")) {
      RESHARD_REQUIRE(cmd->count("--transport") == 0, "give --transport or --transports, not both");
      for (std::string_view t : split(f.transports, ',')) {
        Transport tr = parse_transport(t);
        RESHARD_REQUIRE(tr != Transport::kAuto, "--transports: auto is not a transport of its own");
        RESHARD_REQUIRE(std::find(transports.begin(), transports.end(), tr) == transports.end(), "--transports names ",
                        to_string(tr), " twice");
        transports.push_back(tr);
      }
    }
    std::optional<Output> json;
    if (f.json.given()) json = Output::open(f.json.path(), "--json");
    PlanRequest req = make_plan_request(*cmd, f.plan);
    std::vector<Plan> plans;
    if (transports.empty()) {
      plans.push_back(make_plan(req.src, req.dst, req.dtype, req.options));
    } else {
      for (Transport t : transports) {
        PlanOptions o = req.options;
        o.transport = t;
        plans.push_back(make_plan(req.src, req.dst, req.dtype, o));
      }
    }
    std::vector<ContentionResult> results = run_contention(plans, options);
    if (json) {
      json->write(report_json(plans, results));
      json->flush();
    }
    if (!json || !json->is_stdout()) Output::standard().write(report_table(req, plans, results));
    Index wrong = 0, checked = 0;
    for (const ContentionResult& r : results) {
      wrong += r.wrong_elements;
      checked += r.checked_elements;
    }
    if (wrong != 0) fail(ErrorKind::kMismatch, cat(wrong, " of ", checked, " elements are wrong"));
    return 0;
  };
}

}  // namespace reshard::cli
