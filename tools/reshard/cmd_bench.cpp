// reshard bench: the benchmark sweep (reshard/sweep.hpp), nccl-tests style.
#include <fstream>
#include <iostream>

#include "cli_common.hpp"
#include "reshard/calibrate.hpp"
#include "reshard/sweep.hpp"
#include "reshard/text.hpp"

namespace reshard::cli {
namespace {

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  for (std::string_view part : split(text, ',')) out.emplace_back(part);
  return out;
}

}  // namespace

Command add_bench_command(CLI::App& app) {
  struct Flags {
    std::string meshes, sizes, dtypes = "f32,bf16", strategies = "collective,p2p,hybrid", placements = "R,S0,S1";
    std::string backend = "auto", profile, csv, json, cases, pipeline_chunk;
    int iters = 20, warmup = 5, ranks_per_node = 8;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd =
      app.add_subcommand("bench", "Sweep meshes x placement pairs x sizes x dtypes x strategies; verify and time each");
  cmd->add_option("--meshes", f->meshes, "Meshes, comma-separated (default: those the GPUs fit, e.g. 2,1x2,2x1)");
  cmd->add_option("--sizes", f->sizes, "Tensor sizes, comma-separated (default 1MiB..1GiB in x4 steps)");
  cmd->add_option("--dtypes", f->dtypes, "Dtypes, comma-separated")->capture_default_str();
  cmd->add_option("--strategies", f->strategies, "Strategies to run (auto's choice is marked)")->capture_default_str();
  cmd->add_option("--placements", f->placements, "Placements per mesh dim; every pair is run")->capture_default_str();
  cmd->add_option("--backend", f->backend, "auto, nccl or host")->capture_default_str();
  cmd->add_option("--iters", f->iters, "Timed iterations per run")->capture_default_str();
  cmd->add_option("--warmup", f->warmup, "Untimed iterations first")->capture_default_str();
  cmd->add_option("--ranks-per-node", f->ranks_per_node, "Ranks per node, for the cost model")->capture_default_str();
  cmd->add_option("--profile", f->profile, "Cost-model profile JSON");
  cmd->add_option("--pipeline-chunk", f->pipeline_chunk, "Pipeline chunk bytes (0: off)");
  cmd->add_option("--csv", f->csv, "Write the rows as CSV");
  cmd->add_option("--json", f->json, "Write the rows as JSON");
  cmd->add_option("--cases", f->cases, "Write the cases for bench/pytorch_baseline.py");
  return [f] {
    SweepOptions o;
    for (const std::string& m : f->meshes.empty() ? std::vector<std::string>{} : split_list(f->meshes))
      o.meshes.push_back(parse_mesh_shape(m));
    for (const std::string& s : f->sizes.empty() ? std::vector<std::string>{} : split_list(f->sizes))
      o.sizes_bytes.push_back(parse_bytes("--sizes", s));
    o.dtypes.clear();
    for (const std::string& d : split_list(f->dtypes)) o.dtypes.push_back(parse_dtype(d));
    o.strategies.clear();
    for (const std::string& s : split_list(f->strategies)) {
      Strategy st = parse_strategy(s);
      RESHARD_REQUIRE(st != Strategy::kAuto, "--strategies: auto is not a strategy of its own (its choice is marked)");
      o.strategies.push_back(st);
    }
    o.placements = split_list(f->placements);
    for (const std::string& p : o.placements) parse_placement(p);
    RESHARD_REQUIRE(f->iters >= 1 && f->warmup >= 0, "--iters must be >= 1 and --warmup >= 0");
    o.iters = f->iters;
    o.warmup = f->warmup;
    RESHARD_REQUIRE(f->ranks_per_node >= 1, "--ranks-per-node must be >= 1, got ", f->ranks_per_node);
    o.plan.topology.ranks_per_node = f->ranks_per_node;
    if (!f->profile.empty()) o.plan.profile = load_profile(f->profile);
    if (!f->pipeline_chunk.empty()) o.plan.pipeline_chunk_bytes = parse_bytes("--pipeline-chunk", f->pipeline_chunk);
    RESHARD_REQUIRE(f->backend == "auto" || f->backend == "nccl" || f->backend == "host",
                    "--backend must be auto, nccl or host, got '", f->backend, "'");
    o.backend = f->backend == "host" || (f->backend == "auto" && !nccl_available(2)) ? Backend::kHost : Backend::kNccl;
    o.csv_path = f->csv;
    o.json_path = f->json;
    o.cases_path = f->cases;
    SweepResult res = run_sweep(o, std::cout);
    Index wrong = 0, checked = 0;
    for (const SweepRow& r : res.rows) {
      wrong += r.wrong;
      checked += r.checked;
    }
    std::cout << "# " << res.rows.size() << " runs, " << checked << " elements checked, " << wrong << " wrong\n";
    if (wrong) fail(ErrorKind::kMismatch, cat(wrong, " wrong elements in the sweep"));
    return 0;
  };
}

Command add_calibrate_command(CLI::App& app) {
  struct Flags {
    std::string out, sizes, base;
    int iters = 20;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd =
      app.add_subcommand("calibrate", "Fit the cost model's alpha and beta from measurements on the local GPUs");
  cmd->add_option("--out", f->out, "Write the profile JSON here")->required();
  cmd->add_option("--sizes", f->sizes, "Sizes, comma-separated (default 4KiB..1GiB in x4 steps)");
  cmd->add_option("--iters", f->iters, "Timed repetitions per size")->capture_default_str();
  cmd->add_option("--base", f->base, "Profile for what cannot be measured here (default: the built-in one)");
  return [f] {
    CalibrateOptions o;
    o.iters = f->iters;
    if (!f->base.empty()) o.base = load_profile(f->base);
    if (!f->sizes.empty())
      for (const std::string& size : split_list(f->sizes))
        o.sizes_bytes.push_back(static_cast<double>(parse_bytes("--sizes", size)));
    Calibration cal = calibrate(o);
    std::ofstream out(f->out);
    RESHARD_REQUIRE(out.good(), "--out: cannot write '", f->out, "'");
    out << profile_to_json(cal.profile);
    std::cout << "# calibrated on " << cal.machine << "\n";
    for (const auto& [name, fit] : cal.fits)
      std::cout << "  " << name << ": alpha " << fit.params.alpha_us << " us, bandwidth " << fit.params.bandwidth_GBps
                << " GB/s, rms relative error " << 100 * fit.rms_rel_error << "%, max " << 100 * fit.max_rel_error
                << "%\n";
    std::cout << "# wrote " << f->out << "\n";
    return 0;
  };
}

}  // namespace reshard::cli
