// Batched redistribution on GPUs (NCCL backend, one GPU per rank; skips without 2 GPUs): the host suite's lists of
// mixed dtypes, layouts and sizes, and batches of 100 tensors (more tensors than one copy launch's buffer table holds,
// so the CUDA copy batches split), every element of every tensor of every rank checked; CUDA-graph replay of a batch.
#include <gtest/gtest.h>

#include "batch_lists.hpp"
#include "host_runs.hpp"
#include "reshard/harness.hpp"
#include "reshard/plan_batch.hpp"

namespace reshard {
namespace {

RunOptions gpu_run() { return testing::quick_run(Backend::kNccl); }

Index expected_elements(const PlanBatch& batch) {
  Index n = 0;
  for (const auto& p : batch.plans())
    for (int r = 0; r < batch.mesh().size(); ++r) n += volume(p->dst().box(r));
  return 3 * n;  // two poisoned runs and the final one
}

TEST(GpuBatch, MixedListsEveryElement) {
  if (local_gpu_count() < 2) GTEST_SKIP() << "needs 2 GPUs; " << local_gpu_count() << " visible";
  LocalRunner runner(Backend::kNccl, 2);
  for (const testing::BatchCase& c : testing::batch_cases()) {
    if (Mesh(c.mesh).size() != 2) continue;
    testing::Lcg rng(c.seed);
    std::vector<std::shared_ptr<const Plan>> plans;
    for (int i = 0; i < c.tensors; ++i) plans.push_back(testing::random_plan(rng, Mesh(c.mesh)));
    PlanBatch batch(plans);
    for (Index coalesce : {kDefaultCoalesceMaxBytes, Index{0}}) {
      RunOptions o = gpu_run();
      o.coalesce_max_bytes = coalesce;
      RunResult r = runner.run(batch, o);
      EXPECT_EQ(r.wrong_elements, 0) << "seed " << c.seed << ": " << r.first_error;
      EXPECT_EQ(r.checked_elements, expected_elements(batch));
    }
  }
}

// Lists with one-sided members (nvlink, auto with peer access, staged first steps) among NCCL ones, on every mesh of
// the host suite that fits the GPUs; eager and CUDA-graph runs.
TEST(GpuBatch, OneSidedMembersEveryElement) {
  const int gpus = local_gpu_count();
  if (gpus < 2) GTEST_SKIP() << "needs 2 GPUs; " << gpus << " visible";
  for (const testing::BatchCase& c : testing::batch_cases()) {
    const Mesh mesh(c.mesh);
    if (mesh.size() < 2 || mesh.size() > gpus) continue;
    LocalRunner runner(Backend::kNccl, mesh.size());
    testing::Lcg rng(c.seed + 1000);
    std::vector<std::shared_ptr<const Plan>> plans;
    for (int i = 0; i < c.tensors; ++i) plans.push_back(testing::random_plan(rng, mesh, /*one_sided=*/true));
    PlanBatch batch(plans);
    for (bool graph : {false, true}) {
      RunOptions o = gpu_run();
      o.cuda_graph = graph;
      RunResult r = runner.run(batch, o);
      EXPECT_EQ(r.wrong_elements, 0) << "mesh " << mesh.str() << " seed " << c.seed << (graph ? " (graph)" : "") << ": "
                                     << r.first_error;
      EXPECT_EQ(r.checked_elements, expected_elements(batch));
    }
  }
}

TEST(GpuBatch, HundredTensorsEveryStrategy) {
  if (local_gpu_count() < 2) GTEST_SKIP() << "needs 2 GPUs; " << local_gpu_count() << " visible";
  LocalRunner runner(Backend::kNccl, 2);
  Mesh mesh({2});
  const char* pairs[][2] = {{"S0", "S1"}, {"S1", "S0"}, {"S0", "R"}, {"P", "S0"}, {"R", "S1"}};
  for (const auto& pair : pairs) {
    for (Strategy s : {Strategy::kCollective, Strategy::kP2P}) {
      std::vector<BatchEntry> entries;
      for (int i = 0; i < 100; ++i)
        entries.push_back({Layout(mesh, parse_placements(pair[0]), Dims{64 + i % 3, 40}),
                           Layout(mesh, parse_placements(pair[1]), Dims{64 + i % 3, 40}),
                           i % 4 == 0   ? DType::kBF16
                           : i % 4 == 1 ? DType::kI64
                           : i % 4 == 2 ? DType::kU8
                                        : DType::kF32});
      PlanOptions po;
      po.strategy = s;
      PlanBatch batch = make_plan_batch(entries, po);
      RunResult r = runner.run(batch, gpu_run());
      EXPECT_EQ(r.wrong_elements, 0) << pair[0] << " -> " << pair[1] << ": " << r.first_error;
      EXPECT_EQ(r.checked_elements, expected_elements(batch));
      RunOptions g = gpu_run();
      g.cuda_graph = true;
      RunResult gr = runner.run(batch, g);
      EXPECT_EQ(gr.wrong_elements, 0) << pair[0] << " -> " << pair[1] << " (graph): " << gr.first_error;
    }
  }
}

}  // namespace
}  // namespace reshard
