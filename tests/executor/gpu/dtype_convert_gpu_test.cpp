// dtype conversion in the move on GPUs (NCCL backend, one GPU per rank; skips what the visible GPUs cannot hold): the
// host suite's dtype pairs x layouts (convert_cases.hpp) on every strategy and transport, which exercises the
// converting copy kernel (local copies, NCCL unpacks, one-sided pulls and pushes), the fused one-sided kernels (copies
// and reductions) and the converting reduction kernel (Partial sources); converting batches; CUDA-graph replays; and
// one-sided plans with more ranks than GPUs (ranks sharing GPUs). Every element of every rank is checked against the
// global tensor converted on the host.
#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "convert_cases.hpp"
#include "host_runs.hpp"
#include "reshard/harness.hpp"

namespace reshard {
namespace {

class GpuConvertingRuns : public ::testing::TestWithParam<testing::ConvertPair> {};

TEST_P(GpuConvertingRuns, EveryLayoutEveryStrategyEveryElement) {
  const int gpus = local_gpu_count();
  if (gpus < 2) GTEST_SKIP() << "needs 2 GPUs; " << gpus << " visible";
  std::map<int, std::unique_ptr<LocalRunner>> runners;  // by world size
  int runs = 0;
  testing::for_each_converting_plan(
      GetParam(),
      [&](const Plan& plan, const std::string& what) {
        const int world = plan.src().mesh().world_size();
        auto& runner = runners[world];
        if (!runner) runner = std::make_unique<LocalRunner>(Backend::kNccl, world);
        for (bool graph : {false, true}) {
          RunOptions o = testing::quick_run(Backend::kNccl);
          o.cuda_graph = graph;
          const RunResult r = runner->run(plan, o);
          EXPECT_EQ(r.wrong_elements, 0) << what << (graph ? " (graph)" : "") << ": " << r.first_error;
          EXPECT_GT(r.checked_elements, 0) << what;
          ++runs;
        }
      },
      gpus);
  EXPECT_GT(runs, 0);
}

// Converting batches (every source mesh's cases as one batch): the merged program's converting copies, staged
// receives and one-sided steps on GPUs.
TEST_P(GpuConvertingRuns, BatchesOfEveryLayout) {
  const int gpus = local_gpu_count();
  if (gpus < 2) GTEST_SKIP() << "needs 2 GPUs; " << gpus << " visible";
  std::map<int, std::unique_ptr<LocalRunner>> runners;  // by world size
  int runs = 0;
  testing::for_each_converting_batch(
      GetParam(),
      [&](const PlanBatch& batch, const std::string& what) {
        const int world = batch.mesh().world_size();
        auto& runner = runners[world];
        if (!runner) runner = std::make_unique<LocalRunner>(Backend::kNccl, world);
        const RunResult r = runner->run(batch, testing::quick_run(Backend::kNccl));
        EXPECT_EQ(r.wrong_elements, 0) << what << ": " << r.first_error;
        EXPECT_GT(r.checked_elements, 0) << what;
        ++runs;
      },
      gpus);
  EXPECT_GT(runs, 0);
}

INSTANTIATE_TEST_SUITE_P(Pairs, GpuConvertingRuns, ::testing::ValuesIn(testing::kConvertPairs), testing::pair_name);

// One-sided plans (nvlink p2p, fused and not) with ranks sharing the visible GPUs: the fused converting kernels with
// up to 4 ranks on one GPU.
TEST(GpuConverting, OneSidedPlansOnSharedGpus) {
  if (local_gpu_count() < 1) GTEST_SKIP() << "needs a GPU";
  for (const testing::ConvertPair& pair : testing::kConvertPairs) {
    testing::for_each_converting_plan(pair, [&](const Plan& plan, const std::string& what) {
      for (const Step& s : plan.steps())
        if (is_communication(s.kind) && !(s.kind == StepKind::kP2P && s.transport == Transport::kNvlink)) return;
      const RunResult r = run_shared_gpus(plan, testing::quick_run(Backend::kNccl));
      EXPECT_EQ(r.wrong_elements, 0) << what << ": " << r.first_error;
    });
  }
}

}  // namespace
}  // namespace reshard
