// The batch benchmark: a batch of N tensors vs one tensor of their total size vs one tensor alone.
#include "reshard/batch_bench.hpp"

#include <map>
#include <memory>

#include "reshard/interrupt.hpp"

namespace reshard {

namespace {

// A case's three runs: the batch, one tensor of the batch's total size, one tensor alone.
struct CasePlans {
  PlanBatch batch;
  Plan one, single;
};

CasePlans plan_case(const SweepOptions& o, const SweepCase& c, SweepRun s, const BatchBenchOptions& options) {
  const Mesh mesh(c.mesh);
  RESHARD_REQUIRE(c.shape.size() >= 1, "the batch benchmark needs tensors of at least one dim");
  Dims big = c.shape;
  big[0] = checked_mul(big[0], options.tensors, "the batch benchmark's large tensor");
  PlanOptions po = o.plan;
  po.strategy = s.strategy;
  po.transport = s.transport;
  std::vector<BatchEntry> entries;
  for (int i = 0; i < options.tensors; ++i)
    entries.push_back({Layout(mesh, c.from, c.shape), Layout(mesh, c.to, c.shape),
                       options.dtypes.empty() ? c.dtype : options.dtypes[i % options.dtypes.size()]});
  return CasePlans{make_plan_batch(entries, po),
                   make_plan(Layout(mesh, c.from, big), Layout(mesh, c.to, big), c.dtype, po),
                   make_plan(Layout(mesh, c.from, c.shape), Layout(mesh, c.to, c.shape), c.dtype, po)};
}

// Plans every case and run, naming the first that cannot be planned: nothing is measured before all of them plan.
void plan_every_case(const SweepOptions& o, const std::vector<SweepCase>& cases, const BatchBenchOptions& options) {
  for (const SweepCase& c : cases)
    for (SweepRun s : c.runs) {
      throw_if_stop_requested();
      try {
        plan_case(o, c, s, options);
      } catch (const Error& e) {
        fail(e.kind(), cat("batch case ", Mesh(c.mesh).str(), " [", to_string(c.from), "] -> [", to_string(c.to), "] ",
                           to_string(c.shape), " ", to_string(c.dtype), ", ", to_string(s.strategy), "/",
                           to_string(s.transport), ": ", e.what()));
      }
    }
}

}  // namespace

std::vector<BatchBenchRow> run_batch_bench(const SweepOptions& o, const std::vector<SweepCase>& cases,
                                           const BatchBenchOptions& options,
                                           const std::function<void(const BatchBenchRow&)>& on_row) {
  RESHARD_REQUIRE(options.tensors >= 1 && static_cast<size_t>(options.tensors) <= kMaxBatchTensors,
                  "--batch must be between 1 and ", kMaxBatchTensors, ", got ", options.tensors);
  plan_every_case(o, cases, options);
  std::vector<BatchBenchRow> rows;
  std::map<int, std::unique_ptr<LocalRunner>> runners;
  for (const SweepCase& c : cases) {
    Mesh mesh(c.mesh);
    auto& runner = runners[mesh.size()];
    if (!runner) runner = std::make_unique<LocalRunner>(o.backend, mesh.size(), std::chrono::seconds(120), o.nccl_mode);
    for (SweepRun s : c.runs) {
      throw_if_stop_requested();
      const CasePlans plans = plan_case(o, c, s, options);
      RunOptions ro;
      ro.iters = o.iters;
      ro.warmup = o.warmup;
      ro.coalesce_max_bytes = options.coalesce_max_bytes;
      BatchBenchRow row;
      row.c = c;
      row.run = s;
      row.tensors = options.tensors;
      for (const auto& p : plans.batch.plans()) row.batch_bytes += p->src().global_volume() * p->element_size();
      row.one_bytes = plans.one.src().global_volume() * plans.one.element_size();
      auto record = [&](const RunResult& r, double& us) {
        us = r.timing.median_us;
        row.wrong += r.wrong_elements;
        row.checked += r.checked_elements;
      };
      record(runner->run(plans.batch, ro), row.batch_us);
      record(runner->run(plans.one, ro), row.one_us);
      record(runner->run(plans.single, ro), row.single_us);
      rows.push_back(row);
      if (on_row) on_row(row);
    }
  }
  return rows;
}

}  // namespace reshard
