// reshard run: execute a redistribution on real buffers, verify every element of every rank, report the time.
//
// Metrics (decimal GB/s, as nccl-tests; run_record.hpp): algbw = tensor bytes / time; busbw = the slowest rank's
// max(bytes in, bytes out) / time, where bytes are what the redistribution must move whatever the plan (the p2p
// overlap volume); bound = that same max / link bandwidth, the time no plan can beat (GPU runs, or --link-GBps).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>

#include "cli_batch.hpp"
#include "cli_common.hpp"
#include "cli_output.hpp"
#include "reshard/harness.hpp"
#include "reshard/overlap.hpp"
#include "reshard/plan_format.hpp"
#include "reshard/plan_json.hpp"
#include "reshard/program.hpp"
#include "reshard/run_record.hpp"
#include "reshard/text.hpp"

namespace reshard::cli {
namespace {

constexpr double kMinLinkGBps = 1e-3, kMaxLinkGBps = 1e6;

struct RunFlags {
  PlanFlags plan;
  std::string plan_file;
  std::string backend = "auto";
  int iters = 20;
  int warmup = 5;
  bool graph = false;
  JsonFlag json;
  bool trace = false;
  bool nccl_blocking = false;
  bool measure_link = false;
  int timeout_ms = 120000;
  double link_GBps = 0;
  std::string rendezvous;
  std::string inject_fault;
  std::string stages = "lanes";
  std::string one_sided_copies = "push";
  std::string buffers = "same";
  BatchFlags batch;
};

void parse_fault(const std::string& text, const Mesh& mesh, Backend backend, RunOptions& options) {
  std::vector<std::string_view> parts = split(text, ':');
  bool overflow = false;
  std::optional<long long> r = parts.size() == 2 ? parse_integer(parts[0], &overflow) : std::nullopt;
  RESHARD_REQUIRE(r && (parts[1] == "after-prepare" || parts[1] == "mid-run"), "--inject-fault '", printable(text),
                  "' must be RANK:after-prepare or RANK:mid-run");
  options.fault_rank = check_rank("--inject-fault", *r, mesh);
  RESHARD_REQUIRE(backend == Backend::kNccl,
                  "--inject-fault needs the nccl backend (it ends a rank's process; host ranks share one process)");
  options.fault_point = parts[1] == "mid-run" ? RunOptions::FaultPoint::kMidRun : RunOptions::FaultPoint::kAfterPrepare;
}

std::string report_table(const Plan& plan, const RunResult& result, const RunRecord& record,
                         std::optional<double> link_GBps) {
  const TimingSummary& t = result.timing;
  std::string out = fmt::format("# reshard run: {} ranks, {} backend, {} timed iterations ({}median)\n", result.ranks,
                                to_string(result.backend), t.iterations,
                                t.samples < t.iterations ? fmt::format("{} sampled, ", t.samples) : "");
  out += "# algbw = tensor bytes / time; busbw = slowest rank's max(bytes in, bytes out) / time; ";
  out += link_GBps ? fmt::format("bound = that max / {:.1f} GB/s link", *link_GBps)
                   : std::string("bound: none on the host backend (no link; --link-GBps gives one)");
  out += "; GB/s are decimal\n";
  out += record_table_header() + record_table_row(record) + record_table_note(record);
  out += fmt::format("# time per iteration (us): min {:.1f}, median {:.1f}, p90 {:.1f}, max {:.1f}, mean {:.1f}{}\n",
                     t.min_us, t.median_us, t.p90_us, t.max_us, t.mean_us,
                     t.issue_us ? fmt::format("; the host enqueued a call in {:.1f}", *t.issue_us) : "");
  for (size_t i = 0; i < result.steps.size(); ++i) {
    const StepTime& st = result.steps[i];
    out += fmt::format(
        "# step {} {}{}: pack {:.1f} us, communication {:.1f} us, unpack {:.1f} us, total {:.1f} us (slowest rank, "
        "traced run)\n",
        i, to_string(plan.steps()[i].kind), st.pipelined ? " (pipelined)" : "", st.pack_us, st.comm_us, st.unpack_us,
        st.total_us);
  }
  if (plan.src().mesh().world_size() > plan.topology().ranks_per_node && !plan.scope_rank()) {
    Index programs = 0;
    for (int r = 0; r < plan.src().mesh().world_size(); ++r)
      programs += exchange_bytes_to_other_nodes(lower(plan, r), plan.topology());
    const nlohmann::json j = nlohmann::json::parse(plan_to_json(plan));
    out += fmt::format(
        "# between nodes: the ranks' programs send {} on NCCL send/recv{}; the plan {}, the least {}\n",
        human_bytes(static_cast<double>(programs)),
        plan.communication_steps() > 0 && plan.strategy() != Strategy::kP2P ? " (collectives not counted)" : "",
        human_bytes(j.value("inter_node_bytes", 0.0)),
        j["min_inter_node_bytes"].is_number() ? human_bytes(j["min_inter_node_bytes"].get<double>())
                                              : std::string("not computed"));
  }
  out += fmt::format(
      "# verified {} elements on {} ranks: {}; peak workspace {} per rank\n", result.checked_elements, result.ranks,
      result.wrong_elements == 0 ? std::string("all correct") : fmt::format("{} WRONG", result.wrong_elements),
      human_bytes(static_cast<double>(result.workspace_bytes)));
  return out;
}

}  // namespace

Command add_run_command(CLI::App& app) {
  auto flags = std::make_shared<RunFlags>();
  CLI::App* cmd =
      app.add_subcommand("run", "Run a redistribution on GPUs (or host threads), verify every element, time it");
  add_plan_flags(*cmd, flags->plan);
  cmd->add_option("--plan", flags->plan_file,
                  "Run this plan (from plan --json, possibly edited) instead of planning; layout flags given with it "
                  "must match it");
  cmd->add_option("--backend", flags->backend, "auto (GPUs when enough are visible, else host), nccl or host")
      ->capture_default_str();
  cmd->add_option("--iters", flags->iters, "Timed iterations")->capture_default_str();
  cmd->add_option("--warmup", flags->warmup, "Untimed iterations first")->capture_default_str();
  cmd->add_flag("--graph", flags->graph, "Capture one run in a CUDA graph and time its replays");
  add_json_flag(*cmd, flags->json, "The result");
  cmd->add_flag("--trace", flags->trace, "Time each step's pack, communication and unpack (one extra traced run)");
  cmd->add_flag("--nccl-blocking", flags->nccl_blocking, "Blocking NCCL communicators (default: non-blocking)");
  cmd->add_flag("--measure-link", flags->measure_link, "Measure the GPU link bandwidth first and use it for the bound");
  cmd->add_option("--timeout-ms", flags->timeout_ms, "Abort with an error when a run stalls this long")
      ->capture_default_str();
  cmd->add_option("--link-GBps", flags->link_GBps, "Link bandwidth for the bound (default: the profile's p2p)");
  cmd->add_option("--rendezvous", flags->rendezvous, kRendezvousHelp);
  cmd->add_option("--stages", flags->stages,
                  "Pipelined steps: lanes (pack and unpack on side streams, overlapping the wire) or serial")
      ->capture_default_str();
  cmd->add_option("--one-sided-copies", flags->one_sided_copies,
                  "nvlink steps without reductions: push (every rank copies into its readers' tensors) or pull (out of "
                  "its sources'; kernels where the copy engines cannot reach the peer: ranks of this process)")
      ->capture_default_str();
  cmd->add_option("--buffers", flags->buffers,
                  "Buffers of the runs (nccl backend): same every run; cached (another of 4 sets each run, mapped by "
                  "the peers after the first round: a caching allocator's steady state); new (a set no run used "
                  "before: every peer maps it first). Changing buffers run as reshard.torch does, exchanging "
                  "them with the peers on every run")
      ->capture_default_str();
  add_batch_flags(*cmd, flags->batch, true);
  cmd->add_option("--inject-fault", flags->inject_fault,
                  "Testing aid: RANK:after-prepare or RANK:mid-run makes that rank's process exit abruptly (nccl)");
  return [flags, cmd] {
    const RunFlags& f = *flags;
    RESHARD_REQUIRE(f.iters >= 1, "--iters must be >= 1, got ", f.iters);
    RESHARD_REQUIRE(f.warmup >= 0, "--warmup must be >= 0, got ", f.warmup);
    RESHARD_REQUIRE(f.timeout_ms >= 1, "--timeout-ms must be >= 1, got ", f.timeout_ms);
    RESHARD_REQUIRE(f.backend == "auto" || f.backend == "nccl" || f.backend == "host",
                    "--backend must be auto, nccl or host, got '", printable(f.backend), "'");
    RESHARD_REQUIRE(f.stages == "lanes" || f.stages == "serial", "--stages must be lanes or serial, got '",
                    printable(f.stages), "'");
    RESHARD_REQUIRE(f.one_sided_copies == "pull" || f.one_sided_copies == "push",
                    "--one-sided-copies must be pull or push, got '", printable(f.one_sided_copies), "'");
    RESHARD_REQUIRE(f.buffers == "same" || f.buffers == "cached" || f.buffers == "new",
                    "--buffers must be same, cached or new, got '", printable(f.buffers), "'");
    std::optional<double> link_flag;
    if (cmd->count("--link-GBps")) {
      RESHARD_REQUIRE(std::isfinite(f.link_GBps) && f.link_GBps >= kMinLinkGBps && f.link_GBps <= kMaxLinkGBps,
                      "--link-GBps must be a bandwidth between ", kMinLinkGBps, " and ", kMaxLinkGBps, " GB/s, got ",
                      f.link_GBps);
      link_flag = f.link_GBps;
    }
    std::optional<Output> json;
    if (f.json.given()) json = Output::open(f.json.path(), "--json");

    // What to run: a plan file, or a request to plan.
    std::optional<Plan> loaded;
    std::optional<PlanRequest> req;
    if (!f.plan_file.empty()) {
      loaded.emplace(load_plan_for(*cmd, f.plan, f.plan_file, "--plan"));
    } else {
      req.emplace(make_plan_request(*cmd, f.plan));
    }
    const Mesh mesh = loaded ? loaded->src().mesh() : req->src.mesh();
    const int n = mesh.world_size();

    const std::optional<ProcessPlace> place = process_place(f.rendezvous, f.backend, "run");
    const bool multi_process = place.has_value();
    const LaunchEnvironment env = place ? place->env : LaunchEnvironment{};
    const std::string rendezvous = place ? place->rendezvous : std::string();
    RunOptions options;
    options.iters = f.iters;
    options.warmup = f.warmup;
    options.cuda_graph = f.graph;
    options.trace = f.trace;
    options.nccl_mode = f.nccl_blocking ? NcclMode::kBlocking : NcclMode::kNonBlocking;
    options.stage_schedule = f.stages == "serial" ? StageSchedule::kSerial : StageSchedule::kLanes;
    options.one_sided_copies = f.one_sided_copies == "push" ? OneSidedCopies::kPush : OneSidedCopies::kPull;
    options.timeout = std::chrono::milliseconds(f.timeout_ms);
    options.buffers = f.buffers == "same"     ? BufferUse::kSame
                      : f.buffers == "cached" ? BufferUse::kCached
                                              : BufferUse::kNew;

    if (multi_process) {
      options.backend = Backend::kNccl;
    } else if (f.backend == "nccl" || (f.backend == "auto" && nccl_available(n))) {
      options.backend = Backend::kNccl;
      RESHARD_REQUIRE(nccl_available(n), "--backend nccl needs ", n, " GPUs for mesh ", mesh.str(), " but ",
                      local_gpu_count(), " are visible (use --backend host, or one process per GPU)");
    } else {
      options.backend = Backend::kHost;
    }
    RESHARD_REQUIRE(!f.graph || options.backend == Backend::kNccl, "--graph needs the nccl backend");
    RESHARD_REQUIRE(options.buffers == BufferUse::kSame || options.backend == Backend::kNccl, "--buffers ", f.buffers,
                    " needs the nccl backend (host ranks map nothing)");
    if (options.buffers != BufferUse::kSame) buffer_sets(options);  // its limits, before any plan is made
    RESHARD_REQUIRE(!f.measure_link || options.backend == Backend::kNccl, "--measure-link needs the nccl backend");
    if (!f.inject_fault.empty()) parse_fault(f.inject_fault, mesh, options.backend, options);
    if (f.batch.given()) {
      RESHARD_REQUIRE(req && !multi_process,
                      "--batch and --tensor plan from the layout flags and run every rank in this "
                      "process: not with --plan or a launcher's WORLD_SIZE");
      return run_batch_command(*req, f.batch, options, json);
    }

    std::optional<Plan> plan;
    RunResult result;
    if (multi_process) {
      if (loaded)
        plan.emplace(std::move(*loaded));
      else
        plan.emplace(plan_request(*req, env.rank));
      result = run_plan_process(*plan, env.rank, env.world_size, env.local_rank, rendezvous, options);
    } else {
      if (loaded)
        plan.emplace(std::move(*loaded));
      else
        plan.emplace(plan_request(*req));
      RESHARD_REQUIRE(!plan->scope_rank(), "--plan '", f.plan_file, "' is rank ", plan->scope_rank().value_or(0),
                      "'s plan; one process runs every rank and needs the global plan (plan --json without --rank)");
      result = run_plan(*plan, options);
    }

    TrafficBound bound = traffic_bound(plan->src(), plan->dst(), plan->topology(), plan->element_size());
    std::optional<double> link_GBps = link_flag;
    if (!link_GBps && options.backend == Backend::kNccl) {
      const Profile profile = req ? req->options.profile : default_profile();
      link_GBps = (bound.crosses_nodes ? profile.inter_node : profile.intra_node).p2p.bandwidth_GBps;
    }
    std::string measured;
    if (f.measure_link) {
      LinkMeasurement m = measure_links();
      link_GBps = std::max(m.peer_copy_GBps, m.nccl_p2p_GBps);
      measured = fmt::format(
          "# measured link: cudaMemcpyPeer {:.1f} GB/s, NCCL send/recv {:.1f} GB/s per direction, device copy {:.1f} "
          "GB/s ({} bytes)\n",
          m.peer_copy_GBps, m.nccl_p2p_GBps, m.device_copy_GBps, m.bytes);
    }
    RunRecord record = make_record(*plan, result, bound);
    record.auto_choice = req && req->options.strategy == Strategy::kAuto;
    if (link_GBps) record.bound_us = bound.max_rank_bytes / (*link_GBps * 1e3);
    if (env.rank == 0) {
      if (json) {
        json->write(record_json(record) + "\n");
        json->flush();
      }
      if (!json || !json->is_stdout())
        Output::standard().write(measured + report_table(*plan, result, record, link_GBps));
    }
    if (result.wrong_elements != 0)
      fail(ErrorKind::kMismatch, cat(result.wrong_elements, " of ", result.checked_elements, " elements are wrong"));
    return 0;
  };
}

}  // namespace reshard::cli
