// The executor on GPUs over NCCL (skipped where fewer than 2 GPUs are visible): every pair and strategy on meshes (2),
// (1,2), (2,1), nvlink steps pulled as kernels, 1 GiB tensors, CUDA-graph replay. Every element of every rank is
// checked (harness protocol). The checks every backend runs (every dtype, Partial pairs, memory budgets, zero-copy
// paths): ../backends_test.cpp; failures: executor_gpu_faults_test.cpp; one process per rank:
// executor_gpu_processes_test.cpp.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <vector>

#include "gpu_fixture.hpp"
#include "placement_sets.hpp"
#include "reshard/executor.hpp"
#include "reshard/harness.hpp"
#include "reshard/planner.hpp"
#include "test_plans.hpp"

namespace reshard {
namespace {

using testing::candidate_plans;
using testing::g_checked;
using testing::g_runs;
using testing::g_wrong;
using testing::Gpu;
using testing::light;

class GpuEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    if (g_runs > 0)
      std::printf("GPU SUMMARY: %lld verified runs, %lld elements checked, %lld wrong\n", g_runs.load(),
                  g_checked.load(), g_wrong.load());
  }
};
const auto* g_env = ::testing::AddGlobalTestEnvironment(new GpuEnvironment);

TEST_F(Gpu, EveryPairAndStrategyOnMeshes2And1x2And2x1) {
  for (std::vector<int> m : {std::vector<int>{2}, {1, 2}, {2, 1}}) {
    Mesh mesh(m);
    std::vector<Dims> shapes{Dims{0, 4}, Dims{1, 1}, Dims{7, 5}, Dims{1000, 1003}};
    std::vector<DType> dtypes{DType::kF32, DType::kBF16, DType::kI8};
    if (light()) {
      if (m.size() > 1) continue;
      shapes = {Dims{1, 1}, Dims{7, 5}, Dims{64, 33}};
      dtypes = {DType::kBF16};
    }
    for (const Dims& shape : shapes) {
      for (const auto& from : testing::all_placements(mesh.ndim(), 2)) {
        for (const auto& to : testing::all_placements(mesh.ndim(), 2)) {
          for (DType t : dtypes) {
            for (const Plan& plan : candidate_plans(Layout(mesh, from, shape), Layout(mesh, to, shape), t)) check(plan);
          }
        }
      }
    }
  }
}

// Ranks as threads of this process pulling (ExecutorOptions::one_sided_copies; every other in-process test pushes,
// the default): every pair of R/S0/S1/P(sum) on mesh (2), the nvlink p2p plan with separate copies (kernels read the
// peers' tensors: the copy engines cannot, docs/transports.md), every element.
TEST_F(Gpu, NvlinkStepsPulledAsKernelsEveryPair) {
  const Mesh mesh({2});
  const std::vector<Placement> options{Placement::replicate(), Placement::shard(0), Placement::shard(1),
                                       Placement::partial()};
  RunOptions o = quick();
  o.one_sided_copies = OneSidedCopies::kPull;
  for (const Dims& shape : light() ? std::vector<Dims>{Dims{1, 1}, Dims{7, 5}, Dims{64, 33}}
                                   : std::vector<Dims>{Dims{0, 4}, Dims{1, 1}, Dims{7, 5}, Dims{1000, 1003}}) {
    for (const auto& from : testing::placement_lists(1, options)) {
      for (const auto& to : testing::placement_lists(1, options)) {
        PlanOptions po;
        po.strategy = Strategy::kP2P;
        po.transport = Transport::kNvlink;
        po.fusion = Fusion::kNever;
        check(make_plan(Layout(mesh, from, shape), Layout(mesh, to, shape), DType::kF32, po), o);
      }
    }
  }
}

TEST_F(Gpu, OneGiBTensors) {
  if (light()) GTEST_SKIP() << "light mode";
  Mesh mesh({2});
  RunOptions o;
  o.warmup = 1;
  o.iters = 3;
  for (const char* pair : {"S0>S1", "S1>S0", "S0>R", "R>S0"}) {
    std::string p(pair);
    auto gt = p.find('>');
    Dims shape{16384, 16384};  // f32: 1 GiB
    Layout src(mesh, parse_placements(p.substr(0, gt)), shape), dst(mesh, parse_placements(p.substr(gt + 1)), shape);
    for (const Plan& plan : candidate_plans(src, dst, DType::kF32)) {
      RunResult r = check(plan, o);
      std::printf("  1 GiB f32 %-6s %-10s %9.1f us\n", pair, std::string(to_string(plan.strategy())).c_str(),
                  r.median_us);
    }
  }
  Layout src(mesh, parse_placements("S0"), Dims{16384, 32768});  // bf16: 1 GiB
  for (const Plan& plan : candidate_plans(src, src.with_placements(parse_placements("S1")), DType::kBF16))
    check(plan, o);
}

TEST_F(Gpu, CudaGraphCaptureAndReplay) {
  RunOptions o;
  o.warmup = 2;
  o.iters = 10;
  o.cuda_graph = true;
  for (std::vector<int> m : {std::vector<int>{2}, {1, 2}, {2, 1}}) {
    Mesh mesh(m);
    for (const auto& [from, to] : {std::pair{"S0", "S1"}, std::pair{"S1", "R"}, std::pair{"R", "S0"}}) {
      std::vector<Placement> pf(mesh.ndim(), Placement::replicate()), pt = pf;
      pf.back() = parse_placement(from);
      pt.back() = parse_placement(to);
      Layout src(mesh, pf, Dims{1024, 777});
      for (const Plan& plan : candidate_plans(src, src.with_placements(pt), DType::kBF16)) check(plan, o);
    }
  }
}

}  // namespace
}  // namespace reshard
