// The batch benchmark: a batch of N tensors vs one tensor of their total size vs one tensor alone.
#include "reshard/batch_bench.hpp"

#include <map>
#include <memory>

#include "reshard/interrupt.hpp"

namespace reshard {

std::vector<BatchBenchRow> run_batch_bench(const SweepOptions& o, const std::vector<SweepCase>& cases,
                                           const BatchBenchOptions& options,
                                           const std::function<void(const BatchBenchRow&)>& on_row) {
  RESHARD_REQUIRE(options.tensors >= 1 && static_cast<size_t>(options.tensors) <= kMaxBatchTensors,
                  "--batch must be between 1 and ", kMaxBatchTensors, ", got ", options.tensors);
  std::vector<BatchBenchRow> rows;
  std::map<int, std::unique_ptr<LocalRunner>> runners;
  for (const SweepCase& c : cases) {
    Mesh mesh(c.mesh);
    auto& runner = runners[mesh.size()];
    if (!runner) runner = std::make_unique<LocalRunner>(o.backend, mesh.size(), std::chrono::seconds(120), o.nccl_mode);
    RESHARD_REQUIRE(c.shape.size() >= 1, "the batch benchmark needs tensors of at least one dim");
    Dims big = c.shape;
    big[0] = checked_mul(big[0], options.tensors, "the batch benchmark's large tensor");
    for (SweepRun s : c.runs) {
      throw_if_stop_requested();
      PlanOptions po = o.plan;
      po.strategy = s.strategy;
      po.transport = s.transport;
      std::vector<BatchEntry> entries;
      for (int i = 0; i < options.tensors; ++i)
        entries.push_back({Layout(mesh, c.from, c.shape), Layout(mesh, c.to, c.shape),
                           options.dtypes.empty() ? c.dtype : options.dtypes[i % options.dtypes.size()]});
      const PlanBatch batch = make_plan_batch(entries, po);
      const Plan one = make_plan(Layout(mesh, c.from, big), Layout(mesh, c.to, big), c.dtype, po);
      const Plan single = make_plan(Layout(mesh, c.from, c.shape), Layout(mesh, c.to, c.shape), c.dtype, po);
      RunOptions ro;
      ro.iters = o.iters;
      ro.warmup = o.warmup;
      ro.coalesce_max_bytes = options.coalesce_max_bytes;
      BatchBenchRow row;
      row.c = c;
      row.run = s;
      row.tensors = options.tensors;
      for (const auto& p : batch.plans()) row.batch_bytes += p->src().global_volume() * p->element_size();
      row.one_bytes = one.src().global_volume() * one.element_size();
      auto record = [&](const RunResult& r, double& us) {
        us = r.timing.median_us;
        row.wrong += r.wrong_elements;
        row.checked += r.checked_elements;
      };
      record(runner->run(batch, ro), row.batch_us);
      record(runner->run(one, ro), row.one_us);
      record(runner->run(single, ro), row.single_us);
      rows.push_back(row);
      if (on_row) on_row(row);
    }
  }
  return rows;
}

}  // namespace reshard
