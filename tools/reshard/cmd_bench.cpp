// reshard bench: the benchmark sweep (reshard/sweep.hpp), nccl-tests style. Every output is opened before the first
// measurement, and every row is appended and flushed as it is measured, so an interrupted sweep keeps its rows.
#include <fmt/format.h>
#include <unistd.h>
#include <algorithm>

#include <chrono>
#include <nlohmann/json.hpp>

#include "cli_batch.hpp"
#include "cli_common.hpp"
#include "cli_output.hpp"
#include "reshard/dtype_convert.hpp"
#include "reshard/interrupt.hpp"
#include "reshard/plan_format.hpp"
#include "reshard/sweep.hpp"
#include "reshard/sweep_estimate.hpp"
#include "reshard/text.hpp"

namespace reshard::cli {
namespace {

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  for (std::string_view part : split(text, ',')) out.emplace_back(part);
  return out;
}

std::string duration(double seconds) {
  auto s = static_cast<long long>(seconds + 0.5);
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
}

// The sizes a time budget kept (the host backend's default sweep).
std::string sized_note(const std::vector<SweepCase>& cases, double budget_s) {
  Index low = 0, high = 0;
  for (const SweepCase& c : cases) {
    low = low ? std::min(low, case_bytes(c)) : case_bytes(c);
    high = std::max(high, case_bytes(c));
  }
  return fmt::format(", sizes {} to {} (the default: what fits in about {} here; --sizes for others)",
                     human_bytes(static_cast<double>(low)), human_bytes(static_cast<double>(high)), duration(budget_s));
}

struct BenchFlags {
  std::string meshes, sizes, shapes, dtypes = "f32,bf16", strategies = "collective,p2p,hybrid",
                                     transports = "nccl,nvlink", placements = "R,S0,S1";
  std::string backend = "auto", csv, cases, rendezvous, to_dtype;
  std::map<std::string, std::string> plan_options;  // the plan option table's flags but --strategy and --transport
  JsonFlag json;
  int iters = 20, warmup = 5;
  bool nccl_blocking = false;
  BatchFlags batch;
  PlanFlags between;  // --from-mesh, --from-ranks, --to-mesh, --to-ranks, --world-size
};

// The source and target meshes of a sweep between meshes, as `run` reads them (the target mesh's shape defaults to
// the source's).
std::pair<Mesh, Mesh> sweep_meshes(const CLI::App& cmd, const BenchFlags& f) {
  RESHARD_REQUIRE(f.meshes.empty(), "--meshes and --from-mesh/--to-mesh both name the meshes; give one of them");
  RESHARD_REQUIRE(!f.between.from_mesh.empty(),
                  "--from-mesh is required with --to-mesh, --from-ranks, --to-ranks or --world-size");
  RESHARD_REQUIRE(!f.batch.given(), "--batch runs on one mesh; it does not take --from-mesh/--to-mesh");
  PlanFlags mesh_pair = f.between;
  mesh_pair.tensor.mesh = f.between.from_mesh;
  return make_meshes(cmd, mesh_pair);
}

SweepOptions sweep_options(const CLI::App& cmd, const BenchFlags& f) {
  SweepOptions o;
  if (cross_mesh_flags(cmd)) o.between = sweep_meshes(cmd, f);
  for (const std::string& m : f.meshes.empty() ? std::vector<std::string>{} : split_list(f.meshes))
    o.meshes.push_back(parse_mesh_shape(m));
  for (const std::string& s : f.sizes.empty() ? std::vector<std::string>{} : split_list(f.sizes))
    o.sizes_bytes.push_back(parse_bytes("--sizes", s));
  for (const std::string& s : f.shapes.empty() ? std::vector<std::string>{} : split_list(f.shapes))
    o.shapes.push_back(parse_shape(s));
  RESHARD_REQUIRE(o.shapes.empty() || o.sizes_bytes.empty(), "give --sizes or --shapes, not both");
  o.dtypes.clear();
  for (const std::string& d : split_list(f.dtypes)) o.dtypes.push_back(parse_dtype(d));
  if (!f.to_dtype.empty()) {
    o.to_dtype = parse_dtype(f.to_dtype);
    RESHARD_REQUIRE(!f.batch.given(), "--to-dtype runs one tensor at a time: not with --batch");
    for (DType d : o.dtypes)
      if (d != *o.to_dtype) require_convertible(d, *o.to_dtype);
  }
  o.strategies.clear();
  for (const std::string& s : split_list(f.strategies)) {
    Strategy st = parse_strategy(s);
    RESHARD_REQUIRE(st != Strategy::kAuto, "--strategies: auto is not a strategy of its own (its choice is marked)");
    o.strategies.push_back(st);
  }
  o.transports.clear();
  for (const std::string& t : split_list(f.transports)) {
    Transport tr = parse_transport(t);
    RESHARD_REQUIRE(tr != Transport::kAuto, "--transports: auto is not a transport of its own (its choice is marked)");
    RESHARD_REQUIRE(std::find(o.transports.begin(), o.transports.end(), tr) == o.transports.end(),
                    "--transports names ", to_string(tr), " twice");
    o.transports.push_back(tr);
  }
  o.placements = split_list(f.placements);
  for (const std::string& p : o.placements) parse_placement(p);
  RESHARD_REQUIRE(f.iters >= 1, "--iters must be >= 1, got ", f.iters);
  RESHARD_REQUIRE(f.warmup >= 0, "--warmup must be >= 0, got ", f.warmup);
  o.iters = f.iters;
  o.warmup = f.warmup;
  apply_plan_options(f.plan_options, o.plan);
  RESHARD_REQUIRE(f.backend == "auto" || f.backend == "nccl" || f.backend == "host",
                  "--backend must be auto, nccl or host, got '", printable(f.backend), "'");
  o.backend = f.backend == "host" || (f.backend == "auto" && !nccl_available(2)) ? Backend::kHost : Backend::kNccl;
  o.nccl_mode = f.nccl_blocking ? NcclMode::kBlocking : NcclMode::kNonBlocking;
  return o;
}

std::string header(const SweepLink& link) {
  std::string out;
  if (link.applies) {
    out += fmt::format(
        "# reshard bench: link {:.1f} GB/s (cudaMemcpyPeer {:.1f}, NCCL send/recv {:.1f}), device copy {:.1f} GB/s\n",
        link.link_GBps, link.measured.peer_copy_GBps, link.measured.nccl_p2p_GBps, link.copy_GBps);
    out += "# algbw = tensor bytes / time; busbw = slowest rank's max(bytes in, bytes out) / time;\n";
    out +=
        "# bound = max(that max / link, slowest rank's local bytes / device copy); decimal GB/s; * = auto's choice\n";
  } else {
    out += "# reshard bench: host backend (ranks are threads): no link, so no bound; no CUDA graph ('-')\n";
    out +=
        "# algbw = tensor bytes / time; busbw = slowest rank's max(bytes in, bytes out) / time; decimal GB/s; "
        "* = auto's choice\n";
    out += host_emulation_note();
  }
  return out + record_table_header();
}

// Progress on stderr: rewritten in place on a terminal, one line per run otherwise.
class Progress {
 public:
  Progress() : tty_(::isatty(STDERR_FILENO) == 1), start_(std::chrono::steady_clock::now()) {}
  void row(size_t done, size_t total) {
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    double eta = done ? elapsed / static_cast<double>(done) * static_cast<double>(total - done) : 0;
    fmt::print(stderr, "{}[{}/{}] {:.0f}%, {} elapsed, ETA {}{}", tty_ ? "\r" : "", done, total,
               total ? 100.0 * done / total : 100.0, duration(elapsed), duration(eta), tty_ ? "\x1b[K" : "\n");
    if (tty_ && done == total) fmt::print(stderr, "\n");
    std::fflush(stderr);
  }

 private:
  bool tty_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

Command add_bench_command(CLI::App& app) {
  auto f = std::make_shared<BenchFlags>();
  CLI::App* cmd =
      app.add_subcommand("bench", "Sweep meshes x placement pairs x sizes x dtypes x strategies; verify and time each");
  cmd->add_option("--meshes", f->meshes, "Meshes, comma-separated (default: those the GPUs fit, e.g. 2,1x2,2x1)");
  add_mesh_pair_flags(*cmd, f->between);
  cmd->add_option("--sizes", f->sizes, "Tensor sizes, comma-separated (default 1MiB..1GiB in x4 steps)");
  cmd->add_option("--shapes", f->shapes, "Tensor shapes instead of sizes, comma-separated (e.g. 4096x4096,8x1048576)");
  cmd->add_option("--dtypes", f->dtypes, "Dtypes, comma-separated")->capture_default_str();
  cmd->add_option("--to-dtype", f->to_dtype,
                  "Target dtype of every case (converted on the receiver; a case of that dtype is not converted)");
  cmd->add_option("--strategies", f->strategies, "Strategies to run (auto's choice is marked)")->capture_default_str();
  cmd->add_option("--transports", f->transports,
                  "Transports of p2p and hybrid: nccl, nvlink (unavailable across nodes); collectives run on nccl")
      ->capture_default_str();
  cmd->add_option("--placements", f->placements, "Placements per mesh dim; every pair is run")->capture_default_str();
  cmd->add_option("--backend", f->backend, "auto, nccl or host")->capture_default_str();
  cmd->add_option("--iters", f->iters, "Timed iterations per run")->capture_default_str();
  cmd->add_option("--warmup", f->warmup, "Untimed iterations first")->capture_default_str();
  // The sweep runs every strategy and transport of --strategies and --transports; the other plan options apply to all.
  add_plan_option_flags(*cmd, f->plan_options, {"strategy", "transport"});
  cmd->add_flag("--nccl-blocking", f->nccl_blocking, "Blocking NCCL communicators (default: non-blocking)");
  cmd->add_option("--csv", f->csv, "Write the rows as CSV, each as it is measured");
  add_json_flag(*cmd, f->json, "The link figures and the rows, each row as it is measured,");
  cmd->add_option("--cases", f->cases, "Write the cases for bench/pytorch_baseline.py");
  cmd->add_option("--rendezvous", f->rendezvous, kRendezvousHelp);
  add_batch_flags(*cmd, f->batch, false);
  return [f, cmd] {
    SweepOptions o = sweep_options(*cmd, *f);
    // One process per rank: every process sweeps the same cases as its rank; rank 0 writes the outputs.
    const std::optional<ProcessPlace> place = process_place(f->rendezvous, f->backend, "bench");
    if (place) {
      RESHARD_REQUIRE(!f->batch.given(), "--batch runs every rank in this process: not under a launcher's WORLD_SIZE");
      o.backend = Backend::kNccl;
      o.process = SweepProcess{place->env.rank, place->env.world_size, place->env.local_rank, place->rendezvous};
    }
    o = resolve_sweep(o);
    const bool writer = !place || place->env.rank == 0;
    if (f->batch.given()) {
      RESHARD_REQUIRE(f->cases.empty(), "--cases is not written in batch mode (--batch)");
      std::optional<Output> csv, json;
      if (!f->csv.empty()) csv = Output::open(f->csv, "--csv");
      if (f->json.given()) json = Output::open(f->json.path(), "--json");
      return bench_batch_command(o, f->batch, json, csv);
    }
    // Every output is opened before anything is measured (by rank 0 alone under a launcher).
    std::optional<Output> csv, json, cases_out;
    if (writer && !f->csv.empty()) csv = Output::open(f->csv, "--csv");
    if (writer && f->json.given()) json = Output::open(f->json.path(), "--json");
    if (writer && !f->cases.empty()) cases_out = Output::open(f->cases, "--cases");
    const bool table = writer && (!json || !json->is_stdout());
    Output out = Output::standard();

    std::vector<SweepCase> cases = sweep_cases(o);
    if (csv) {
      csv->write(record_csv_header());
      csv->flush();
    }
    Progress progress;
    size_t rows = 0;
    bool json_open = false;
    SweepEvents events;
    events.on_start = [&](const SweepLink& link, const SweepStart& start) {
      if (!writer) return;
      if (cases_out) {
        cases_out->write(sweep_cases_json(start.cases));
        cases_out->flush();
      }
      fmt::print(stderr, "reshard bench: {} runs ({} cases) on the {} backend{}{}, estimated {}\n", start.runs,
                 start.cases.size(), to_string(o.backend),
                 place ? fmt::format(", one process per rank ({} processes)", place->env.world_size) : "",
                 o.time_budget_s ? sized_note(start.cases, *o.time_budget_s) : "", duration(start.estimate_s));
      if (table) out.write(std::string(o.plan.low_sm ? "# planned in low-SM mode (--low-sm)\n" : "") + header(link));
      if (json) {
        nlohmann::ordered_json l = nullptr;  // the host backend has no link
        if (link.applies)
          l = {{"peer_copy_GBps", link.measured.peer_copy_GBps},
               {"nccl_p2p_GBps", link.measured.nccl_p2p_GBps},
               {"device_copy_GBps", link.measured.device_copy_GBps},
               {"bytes", link.measured.bytes},
               {"bound_link_GBps", link.link_GBps},
               {"bound_copy_GBps", link.copy_GBps}};
        json->write(fmt::format("{{\"link\": {},\n \"profile\": {},\n \"low_sm\": {},\n \"rows\": [\n", l.dump(),
                                nlohmann::json(o.plan.profile.name).dump(), o.plan.low_sm));
        json->flush();
        json_open = true;
      }
    };
    events.on_row = [&](const RunRecord& row, size_t done, size_t runs) {
      if (table) {
        out.write(record_table_row(row));
        out.flush();
      }
      if (csv) {
        csv->write(record_csv_row(row));
        csv->flush();
      }
      if (json) {
        json->write((rows ? ",\n  " : "  ") + record_json(row));
        json->flush();
      }
      ++rows;
      if (writer) progress.row(done, runs);
    };
    auto close_json = [&] {
      if (json && json_open) {
        json->write("\n ]}\n");
        json->flush();
      }
    };
    SweepSummary summary;
    try {
      summary = run_sweep(o, cases, events);
    } catch (const Interrupted&) {
      close_json();  // the rows measured so far stay valid JSON
      fmt::print(stderr, "reshard bench: stopped after {} runs; every row measured is in the outputs\n", rows);
      throw;
    } catch (...) {
      close_json();  // whatever stopped the sweep (a stop seen as a rank's error too): the rows stay valid JSON
      throw;
    }
    close_json();
    if (table)
      out.write(
          fmt::format("# {} runs, {} elements checked, {} wrong\n", summary.runs, summary.checked, summary.wrong));
    if (summary.wrong) fail(ErrorKind::kMismatch, cat(summary.wrong, " wrong elements in the sweep"));
    return 0;
  };
}

}  // namespace reshard::cli
