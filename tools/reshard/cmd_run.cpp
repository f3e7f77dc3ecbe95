// reshard run: execute a redistribution on real buffers, verify every element of every rank, report the time.
//
// Metrics (decimal GB/s, as nccl-tests): algbw = tensor bytes / time; busbw = the slowest rank's
// max(bytes in, bytes out) / time, where bytes are what the redistribution must move whatever the plan (the p2p
// overlap volume); bound = that same max / link bandwidth, the time no plan can beat.
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_common.hpp"
#include "reshard/detail/json_text.hpp"
#include "reshard/harness.hpp"
#include "reshard/overlap.hpp"
#include "reshard/plan_format.hpp"
#include "reshard/text.hpp"

namespace reshard::cli {
namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  try {
    return std::stoi(v);
  } catch (...) {
    fail(ErrorKind::kInvalidArgument, cat("environment variable ", name, "='", v, "' is not an integer"));
  }
}

struct Report {
  const Plan& plan;
  const RunResult& result;
  TrafficBound bound;
  double link_GBps;
};

void print_table(const Report& r) {
  const Plan& p = r.plan;
  double tensor_bytes = static_cast<double>(p.src().global_volume() * p.element_size());
  double t = r.result.median_us;
  double algbw = t > 0 ? tensor_bytes / (t * 1e3) : 0, busbw = t > 0 ? r.bound.max_rank_bytes / (t * 1e3) : 0;
  double bound_us = r.bound.max_rank_bytes / (r.link_GBps * 1e3);
  std::cout
      << "# reshard run: " << r.result.ranks << " ranks, " << to_string(r.result.backend) << " backend, "
      << r.result.iteration_us.size() << " timed iterations (median)\n"
      << "# algbw = tensor bytes / time; busbw = slowest rank's max(bytes in, bytes out) / time; bound = that max / "
      << r.link_GBps << " GB/s link; GB/s are decimal\n";
  std::cout << std::left << std::setw(8) << "# mesh" << std::setw(12) << "from" << std::setw(12) << "to"
            << std::setw(16) << "shape" << std::setw(6) << "dtype" << std::setw(12) << "strategy" << std::right
            << std::setw(14) << "bytes" << std::setw(12) << "time(us)" << std::setw(12) << "algbw" << std::setw(10)
            << "busbw" << std::setw(11) << "bound(us)" << std::setw(9) << "%bound" << std::setw(11) << "est(us)"
            << std::setw(10) << "wrong\n";
  std::cout << std::left << std::setw(8) << ("  " + p.src().mesh().str()) << std::setw(12)
            << to_string(p.src().placements()) << std::setw(12) << to_string(p.dst().placements()) << std::setw(16)
            << to_string(p.src().global_shape()) << std::setw(6) << to_string(p.dtype()) << std::setw(12)
            << (std::string(to_string(p.strategy())) + "/" + std::string(to_string(p.transport()))) << std::right
            << std::setw(14) << static_cast<Index>(tensor_bytes) << std::fixed
            << std::setprecision(1) << std::setw(12) << t << std::setprecision(2) << std::setw(12) << algbw
            << std::setw(10) << busbw << std::setprecision(1) << std::setw(11) << bound_us << std::setw(8)
            << (t > 0 ? 100.0 * bound_us / t : 0) << "%" << std::setw(11) << p.estimated_us() << std::setw(9)
            << r.result.wrong_elements << "\n";
  for (size_t i = 0; i < r.result.steps.size(); ++i) {
    const StepTime& st = r.result.steps[i];
    std::cout << "# step " << i << " " << to_string(p.steps()[i].kind) << std::setprecision(1)
              << (st.pipelined ? " (pipelined)" : "") << ": pack " << st.pack_us << " us, communication " << st.comm_us
              << " us, unpack " << st.unpack_us << " us, total " << st.total_us << " us (slowest rank, traced run)\n";
  }
  std::cout << "# verified " << r.result.checked_elements << " elements on " << r.result.ranks << " ranks: "
            << (r.result.wrong_elements == 0 ? "all correct" : std::to_string(r.result.wrong_elements) + " WRONG")
            << "; peak workspace " << human_bytes(static_cast<double>(r.result.workspace_bytes)) << " per rank\n";
}

std::string report_json(const Report& r) {
  const Plan& p = r.plan;
  double tensor_bytes = static_cast<double>(p.src().global_volume() * p.element_size());
  double t = r.result.median_us;
  nlohmann::ordered_json j;
  j["mesh"] = p.src().mesh().shape();
  j["from"] = to_string(p.src().placements());
  j["to"] = to_string(p.dst().placements());
  j["global_shape"] = p.src().global_shape().vec();
  j["dtype"] = std::string(to_string(p.dtype()));
  j["strategy"] = std::string(to_string(p.strategy()));
  j["transport"] = std::string(to_string(p.transport()));
  j["backend"] = std::string(to_string(r.result.backend));
  j["ranks"] = r.result.ranks;
  j["tensor_bytes"] = static_cast<Index>(tensor_bytes);
  j["max_rank_bytes"] = r.bound.max_rank_bytes;
  j["median_us"] = t;
  j["algbw_GBps"] = t > 0 ? tensor_bytes / (t * 1e3) : 0.0;
  j["busbw_GBps"] = t > 0 ? r.bound.max_rank_bytes / (t * 1e3) : 0.0;
  j["link_GBps"] = r.link_GBps;
  j["bound_us"] = r.bound.max_rank_bytes / (r.link_GBps * 1e3);
  j["estimated_us"] = p.estimated_us();
  j["workspace_bytes"] = r.result.workspace_bytes;
  j["wrong_elements"] = r.result.wrong_elements;
  j["checked_elements"] = r.result.checked_elements;
  j["iteration_us"] = r.result.iteration_us;
  return detail::json_text(j);
}

}  // namespace

Command add_run_command(CLI::App& app) {
  struct Flags {
    PlanFlags plan;
    std::string backend = "auto";
    int iters = 20;
    int warmup = 5;
    bool graph = false;
    bool json = false;
    bool trace = false;
    bool nccl_blocking = false;
    bool measure_link = false;
    int timeout_ms = 120000;
    double link_GBps = 0;
    std::string rendezvous;
    std::string inject_fault;
    std::string stages = "lanes";
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd =
      app.add_subcommand("run", "Run a redistribution on GPUs (or host threads), verify every element, time it");
  add_plan_flags(*cmd, flags->plan);
  cmd->add_option("--backend", flags->backend, "auto (GPUs when enough are visible, else host), nccl or host")
      ->capture_default_str();
  cmd->add_option("--iters", flags->iters, "Timed iterations")->capture_default_str();
  cmd->add_option("--warmup", flags->warmup, "Untimed iterations first")->capture_default_str();
  cmd->add_flag("--graph", flags->graph, "Capture one run in a CUDA graph and time its replays");
  cmd->add_flag("--json", flags->json, "Print the result as JSON");
  cmd->add_flag("--trace", flags->trace, "Time each step's pack, communication and unpack (one extra traced run)");
  cmd->add_flag("--nccl-blocking", flags->nccl_blocking, "Blocking NCCL communicators (default: non-blocking)");
  cmd->add_flag("--measure-link", flags->measure_link, "Measure the GPU link bandwidth first and use it for the bound");
  cmd->add_option("--timeout-ms", flags->timeout_ms, "Abort with an error when a run stalls this long")
      ->capture_default_str();
  cmd->add_option("--link-GBps", flags->link_GBps, "Link bandwidth for the bound (default: the profile's p2p)");
  cmd->add_option("--rendezvous", flags->rendezvous,
                  "One process per rank (RANK, WORLD_SIZE, LOCAL_RANK from the launcher): file:PATH or tcp:HOST:PORT "
                  "(default with MASTER_ADDR/MASTER_PORT set: tcp:MASTER_ADDR:MASTER_PORT+1)");
  cmd->add_option("--stages", flags->stages,
                  "Pipelined steps: lanes (pack and unpack on side streams, overlapping the wire) or serial")
      ->capture_default_str();
  cmd->add_option("--inject-fault", flags->inject_fault,
                  "Testing aid: RANK:after-prepare or RANK:mid-run makes that rank's process exit abruptly (nccl)");
  return [flags] {
    PlanRequest req = make_plan_request(flags->plan);
    RESHARD_REQUIRE(flags->iters >= 1, "--iters must be >= 1, got ", flags->iters);
    RESHARD_REQUIRE(flags->warmup >= 0, "--warmup must be >= 0, got ", flags->warmup);
    RESHARD_REQUIRE(flags->timeout_ms >= 1, "--timeout-ms must be >= 1, got ", flags->timeout_ms);
    RESHARD_REQUIRE(flags->backend == "auto" || flags->backend == "nccl" || flags->backend == "host",
                    "--backend must be auto, nccl or host, got '", flags->backend, "'");
    const int n = req.src.mesh().size();
    RunOptions options;
    options.iters = flags->iters;
    options.warmup = flags->warmup;
    options.cuda_graph = flags->graph;
    options.trace = flags->trace;
    options.nccl_blocking = flags->nccl_blocking;
    RESHARD_REQUIRE(flags->stages == "lanes" || flags->stages == "serial", "--stages must be lanes or serial, got '",
                    flags->stages, "'");
    options.stage_overlap = flags->stages == "serial" ? StageOverlap::kSerial : StageOverlap::kLanes;
    if (!flags->inject_fault.empty()) {
      std::vector<std::string_view> parts = split(flags->inject_fault, ':');
      std::optional<long long> r = parts.size() == 2 ? parse_integer(parts[0]) : std::nullopt;
      RESHARD_REQUIRE(r && (parts[1] == "after-prepare" || parts[1] == "mid-run"), "--inject-fault '",
                      flags->inject_fault, "' must be RANK:after-prepare or RANK:mid-run");
      options.fault_rank = static_cast<int>(*r);
      options.fault_point =
          parts[1] == "mid-run" ? RunOptions::FaultPoint::kMidRun : RunOptions::FaultPoint::kAfterPrepare;
    }
    options.timeout = std::chrono::milliseconds(flags->timeout_ms);

    const int world = env_int("WORLD_SIZE", 1), rank = env_int("RANK", 0);
    std::string rendezvous = flags->rendezvous;
    if (rendezvous.empty() && world > 1 && std::getenv("MASTER_ADDR") && std::getenv("MASTER_PORT"))
      rendezvous = cat("tcp:", std::getenv("MASTER_ADDR"), ":", env_int("MASTER_PORT", 0) + 1);
    const bool multi_process = world > 1 || !flags->rendezvous.empty();

    if (flags->backend == "nccl" || (flags->backend == "auto" && (multi_process || nccl_available(n)))) {
      options.backend = Backend::kNccl;
    } else {
      options.backend = Backend::kHost;
    }
    if (options.backend == Backend::kNccl && !multi_process)
      RESHARD_REQUIRE(nccl_available(n), "--backend nccl needs ", n, " GPUs for mesh ", req.src.mesh().str(), " but ",
                      local_gpu_count(), " are visible (use --backend host, or one process per GPU)");
    RESHARD_REQUIRE(!flags->graph || options.backend == Backend::kNccl, "--graph needs the nccl backend");

    RunResult result;
    std::optional<Plan> plan;
    if (multi_process) {
      RESHARD_REQUIRE(!rendezvous.empty(), "multi-process run: give --rendezvous file:PATH or tcp:HOST:PORT");
      RESHARD_REQUIRE(options.backend == Backend::kNccl, "multi-process runs use the nccl backend");
      plan.emplace(make_rank_plan(req.src, req.dst, req.dtype, rank, req.options));
      result = run_plan_process(*plan, rank, world, env_int("LOCAL_RANK", rank), rendezvous, options);
    } else {
      plan.emplace(make_plan(req.src, req.dst, req.dtype, req.options));
      result = run_plan(*plan, options);
    }
    TrafficBound bound = traffic_bound(req.src, req.dst, req.options.topology, element_size(req.dtype));
    const LinkProfile& link = bound.crosses_nodes ? req.options.profile.inter_node : req.options.profile.intra_node;
    double link_GBps = flags->link_GBps > 0 ? flags->link_GBps : link.p2p.bandwidth_GBps;
    if (flags->measure_link) {
      LinkMeasurement m = measure_links();
      link_GBps = std::max(m.peer_copy_GBps, m.nccl_p2p_GBps);
      if (rank == 0)
        std::cout << "# measured link: cudaMemcpyPeer " << m.peer_copy_GBps << " GB/s, NCCL send/recv "
                  << m.nccl_p2p_GBps << " GB/s per direction, device copy " << m.device_copy_GBps << " GB/s ("
                  << m.bytes << " bytes)\n";
    }
    Report report{*plan, result, bound, link_GBps};
    if (rank == 0) std::cout << (flags->json ? report_json(report) + "\n" : "");
    if (rank == 0 && !flags->json) print_table(report);
    if (result.wrong_elements != 0)
      fail(ErrorKind::kMismatch, cat(result.wrong_elements, " of ", result.checked_elements, " elements are wrong"));
    return 0;
  };
}

}  // namespace reshard::cli
