#include "reshard/sweep.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>

#include "reshard/detail/json_text.hpp"
#include "reshard/interrupt.hpp"
#include "reshard/memory_check.hpp"
#include "reshard/overlap.hpp"
#include "reshard/plan_cache.hpp"
#include "reshard/sweep_estimate.hpp"

namespace reshard {
namespace {

std::vector<std::vector<Placement>> all_sides(int mesh_ndim, const std::vector<std::string>& options) {
  std::vector<std::vector<Placement>> out{{}};
  for (int k = 0; k < mesh_ndim; ++k) {
    std::vector<std::vector<Placement>> next;
    for (const auto& p : out)
      for (const std::string& o : options) {
        next.push_back(p);
        next.back().push_back(parse_placement(o));
      }
    out = std::move(next);
  }
  return out;
}

// The largest local copy any rank makes (bytes it keeps from source to target).
Index max_local_bytes(const Layout& src, const Layout& dst, int es) {
  Index worst = 0;
  for (int r = 0; r < src.mesh().world_size(); ++r)
    worst = std::max(worst, volume(intersect(src.box(r), dst.box(r))) * es);
  return worst;
}

PlanOptions plan_options(const SweepOptions& o, SweepRun run) {
  PlanOptions po = o.plan;
  po.strategy = run.strategy;
  po.transport = run.transport;
  return po;
}

// The case's source and target layouts (on one mesh unless the sweep runs between meshes).
std::pair<Layout, Layout> case_layouts(const SweepCase& c) {
  const auto [from, to] = c.between ? *c.between : std::pair<Mesh, Mesh>{Mesh(c.mesh), Mesh(c.mesh)};
  return {Layout(from, c.from, c.shape), Layout(to, c.to, c.shape)};
}

Plan plan_case(const SweepOptions& o, const SweepCase& c, SweepRun run) {
  const auto [src, dst] = case_layouts(c);
  return make_converting_plan(src, dst, c.dtype, o.to_dtype.value_or(c.dtype), plan_options(o, run));
}

// The most plans a sweep keeps between its memory check and its runs (bounds the sweep's host memory).
constexpr size_t kSweepPlans = 4096;

// The same plan through the sweep's cache: the memory check and the runs plan each case once between them.
std::shared_ptr<const Plan> cached_plan_case(PlanCache& cache, const SweepOptions& o, const SweepCase& c,
                                             SweepRun run) {
  const auto [src, dst] = case_layouts(c);
  std::shared_ptr<const Plan> plain = cache.get_or_plan(src, dst, c.dtype, plan_options(o, run));
  if (!o.to_dtype || *o.to_dtype == c.dtype) return plain;
  return std::make_shared<const Plan>(with_conversion(*plain, *o.to_dtype, plan_options(o, run)));  // not cached
}

// Host memory of the largest run, and device memory of the largest rank, over every run of the sweep.
void check_sweep_memory(const SweepOptions& o, const std::vector<SweepCase>& cases, PlanCache& plans) {
  MemoryNeed worst;
  int worst_ranks = 1;
  for (const SweepCase& c : cases) {
    throw_if_stop_requested();
    for (SweepRun s : c.runs) {
      const std::shared_ptr<const Plan> cached = cached_plan_case(plans, o, c, s);
      const Plan& plan = *cached;
      MemoryNeed need = o.process ? memory_need(plan, o.backend, o.process->rank) : memory_need(plan, o.backend);
      if (need.host_bytes > worst.host_bytes) {
        worst.host_bytes = need.host_bytes;
        worst.host_detail = need.host_detail + " for mesh " + plan.src().mesh().str() + " " +
                            to_string(plan.src().global_shape()) + " " + std::string(to_string(plan.dtype()));
      }
      if (need.device_bytes > worst.device_bytes) {
        worst.device_bytes = need.device_bytes;
        worst.device_detail = need.device_detail;
        worst_ranks = plan.src().mesh().world_size();
      }
    }
  }
  std::vector<int> devices;
  if (o.process)
    devices.push_back(o.process->device);
  else if (o.backend == Backend::kNccl)
    for (int r = 0; r < worst_ranks; ++r) devices.push_back(r);
  check_memory(worst, o.backend, devices);
}

// The runners of a sweep: in this process one per world size, or the job's one communicator (one process per rank).
class SweepRunner {
 public:
  explicit SweepRunner(const SweepOptions& o) : o_(o) {
    if (o.process)
      process_ = std::make_unique<ProcessRunner>(o.process->rank, o.process->world_size, o.process->device,
                                                 o.process->rendezvous, std::chrono::seconds(120), o.nccl_mode);
  }
  RunResult run(const Plan& plan, const RunOptions& ro) {
    if (process_) return process_->run(plan, ro);
    const int world = plan.src().mesh().world_size();
    std::unique_ptr<LocalRunner>& runner = local_[world];
    if (!runner) runner = std::make_unique<LocalRunner>(o_.backend, world, std::chrono::seconds(120), o_.nccl_mode);
    return runner->run(plan, ro);
  }

 private:
  const SweepOptions& o_;
  std::map<int, std::unique_ptr<LocalRunner>> local_;
  std::unique_ptr<ProcessRunner> process_;
};

// One run of each probe case, timed (wall clock, verification included), and the line through them.
RunCost probe_run_cost(const SweepOptions& o, const std::vector<SweepCase>& cases, SweepRunner& runner) {
  std::vector<std::pair<Index, double>> points;
  for (size_t i : probe_cases(cases, probe_bytes(o.backend))) {
    throw_if_stop_requested();
    const Plan plan = plan_case(o, cases[i], cases[i].runs.front());
    RunOptions ro;
    ro.iters = o.iters;
    ro.warmup = o.warmup;
    const auto start = std::chrono::steady_clock::now();
    runner.run(plan, ro);
    points.emplace_back(case_bytes(cases[i]),
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  if (points.empty()) return RunCost{};
  const auto& [small_bytes, small_s] = points.front();
  const auto& [large_bytes, large_s] = points.back();
  return fit_run_cost(small_bytes, small_s, large_bytes, large_s);
}

}  // namespace

Dims sweep_shape(Index bytes, DType dtype) {
  Index n = std::max<Index>(1, bytes / element_size(dtype));
  int bits = 0;
  while ((Index(1) << (bits + 1)) <= n) ++bits;
  Index rows = Index(1) << (bits / 2);
  return Dims{rows, n / rows};
}

SweepOptions resolve_sweep(const SweepOptions& in) {
  SweepOptions o = in;
  RESHARD_REQUIRE(!o.between || o.meshes.empty(), "a sweep runs on its meshes or between two meshes, not both");
  if (o.process)
    RESHARD_REQUIRE(o.backend == Backend::kNccl, "a sweep of one process per rank runs on the nccl backend");
  if (o.meshes.empty() && !o.between) {
    int n = o.process ? o.process->world_size : o.backend == Backend::kNccl ? std::max(local_gpu_count(), 1) : 2;
    o.meshes = {{n}};
    if (n >= 2) {
      o.meshes.push_back({1, n});
      o.meshes.push_back({n, 1});
    }
    if (n >= 4) o.meshes.push_back({2, n / 2});
    if (n >= 8) {
      o.meshes.push_back({n / 2, 2});
      o.meshes.push_back({2, 2, n / 4});
    }
  }
  if (o.process) {
    for (const auto& m : o.meshes)
      RESHARD_REQUIRE(Mesh(m).world_size() == o.process->world_size, "the launcher started ", o.process->world_size,
                      " processes but mesh ", Mesh(m).str(), " has ", Mesh(m).world_size(),
                      " ranks (one process per rank runs meshes of the job's size)");
    if (o.between)
      RESHARD_REQUIRE(std::max(o.between->first.world_size(), o.between->second.world_size()) == o.process->world_size,
                      "the launcher started ", o.process->world_size, " processes but the meshes span ",
                      std::max(o.between->first.world_size(), o.between->second.world_size()), " ranks");
  }
  if (o.sizes_bytes.empty() && o.shapes.empty()) {
    const bool host = o.backend == Backend::kHost;
    for (Index s = host ? Index(16) << 10 : Index(1) << 20; s <= (host ? Index(64) << 20 : Index(1) << 30); s *= 4)
      o.sizes_bytes.push_back(s);
    if (host && !o.time_budget_s) o.time_budget_s = 60;
  }
  RESHARD_REQUIRE(o.iters >= 1 && o.warmup >= 0, "iterations must be >= 1 and warm-up >= 0");
  return o;
}

std::vector<SweepCase> sweep_cases(const SweepOptions& o) {
  std::vector<SweepCase> cases;
  std::vector<std::pair<Mesh, Mesh>> pairs;
  if (o.between) pairs.push_back(*o.between);
  for (const auto& m : o.meshes) pairs.emplace_back(Mesh(m), Mesh(m));
  for (const auto& [from_mesh, to_mesh] : pairs) {
    const auto from_sides = all_sides(from_mesh.ndim(), o.placements),
               to_sides = all_sides(to_mesh.ndim(), o.placements);
    for (const auto& from : from_sides) {
      for (const auto& to : to_sides) {
        for (DType dtype : o.dtypes) {
          std::vector<Dims> shapes = o.shapes;
          if (shapes.empty())
            for (Index size : o.sizes_bytes) shapes.push_back(sweep_shape(size, dtype));
          for (const Dims& shape : shapes) {
            throw_if_stop_requested();
            SweepCase c{from_mesh.shape(), o.between, from, to, shape, dtype, {}, {}};
            Plan automatic = plan_case(o, c, SweepRun{Strategy::kAuto, Transport::kAuto});
            c.auto_choice = SweepRun{automatic.strategy(), automatic.transport()};
            for (Strategy s : o.strategies)
              for (const Candidate& cand : automatic.candidates()) {
                const bool wanted =
                    std::find(o.transports.begin(), o.transports.end(), cand.transport) != o.transports.end();
                if (cand.strategy == s && cand.available && (wanted || s == Strategy::kCollective))
                  c.runs.push_back(SweepRun{s, cand.transport});
              }
            cases.push_back(std::move(c));
          }
        }
      }
    }
  }
  return cases;
}

size_t sweep_runs(const std::vector<SweepCase>& cases) {
  size_t n = 0;
  for (const SweepCase& c : cases) n += c.runs.size();
  return n;
}

std::string sweep_cases_json(const std::vector<SweepCase>& cases) {
  nlohmann::ordered_json j = nlohmann::ordered_json::array();
  for (const SweepCase& c : cases) {
    nlohmann::ordered_json one;
    if (c.between) {
      one = {{"from_mesh", c.between->first.shape()},
             {"from_ranks", c.between->first.ranks()},
             {"to_mesh", c.between->second.shape()},
             {"to_ranks", c.between->second.ranks()}};
    } else {
      one = {{"mesh", c.mesh}};
    }
    one["from"] = to_string(c.from);
    one["to"] = to_string(c.to);
    one["shape"] = c.shape.vec();
    one["dtype"] = std::string(to_string(c.dtype));
    j.push_back(std::move(one));
  }
  return j.dump(1) + "\n";
}

SweepSummary run_sweep(const SweepOptions& o, std::vector<SweepCase> cases, const SweepEvents& events) {
  // Holds every run's plan, up to kSweepPlans (sweep meshes are one host's GPUs, so plans are small): the runs visit
  // them in the memory check's order, so a cache smaller than the sweep evicts each plan before its run.
  PlanCache plans(std::clamp<size_t>(sweep_runs(cases), 1, kSweepPlans));
  if (!o.time_budget_s) check_sweep_memory(o, cases, plans);  // with a budget: once the cases that fit are known
  SweepLink link;
  link.applies = o.backend == Backend::kNccl;
  link.link_GBps = o.plan.profile.intra_node.p2p.bandwidth_GBps;
  link.copy_GBps = o.plan.profile.copy.bandwidth_GBps;
  // One process per rank: rank 0 measures (GPUs 0 and 1 from its process) while the others wait to connect.
  if (link.applies && o.measure_link && local_gpu_count() >= 2 && (!o.process || o.process->rank == 0)) {
    link.measured = measure_links();
    link.link_GBps = std::max(link.measured.peer_copy_GBps, link.measured.nccl_p2p_GBps);
    link.copy_GBps = link.measured.device_copy_GBps;
  }
  SweepRunner runner(o);
  const RunCost cost = probe_run_cost(o, cases, runner);
  if (o.time_budget_s) {
    cases = fit_to_budget(std::move(cases), o, cost, *o.time_budget_s);
    check_sweep_memory(o, cases, plans);
  }
  const size_t runs = sweep_runs(cases);
  if (events.on_start) events.on_start(link, SweepStart{cases, runs, estimate_sweep_seconds(cases, o, cost)});

  SweepSummary summary;
  for (const SweepCase& c : cases) {
    const auto [src, dst] = case_layouts(c);
    const int es = element_size(c.dtype);
    TrafficBound tb = traffic_bound(src, dst, o.plan.topology, es);
    std::optional<double> bound;
    if (link.applies)
      bound =
          std::max(tb.max_rank_bytes / (link.link_GBps * 1e3), max_local_bytes(src, dst, es) / (link.copy_GBps * 1e3));
    for (SweepRun s : c.runs) {
      throw_if_stop_requested();
      const std::shared_ptr<const Plan> cached = cached_plan_case(plans, o, c, s);
      const Plan& plan = *cached;
      RunOptions ro;
      ro.iters = o.iters;
      ro.warmup = o.warmup;
      RunResult r = runner.run(plan, ro);
      RunRecord row = make_record(plan, r, tb);
      row.auto_choice = c.auto_choice == s;
      row.bound_us = bound;
      if (row.auto_choice && o.backend == Backend::kNccl && row.tensor_bytes <= o.graph_max_bytes) {
        RunOptions g = ro;
        g.cuda_graph = true;
        RunResult gr = runner.run(plan, g);
        row.graph_us = gr.timing.median_us;
        row.wrong += gr.wrong_elements;
        row.checked += gr.checked_elements;
      }
      ++summary.runs;
      summary.wrong += row.wrong;
      summary.checked += row.checked;
      if (events.on_row) events.on_row(row, summary.runs, runs);
    }
  }
  return summary;
}

}  // namespace reshard
