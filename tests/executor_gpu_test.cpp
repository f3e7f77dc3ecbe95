// The executor on GPUs over NCCL (skipped where fewer than 2 GPUs are visible): every strategy and dtype on meshes
// (2), (1,2), (2,1), sizes from 0 bytes to 1 GiB, CUDA-graph replay, zero-copy paths. Every element of every rank is
// checked (harness protocol). Failures: executor_gpu_faults_test.cpp; one process per rank:
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

std::vector<Plan> plans_for(const Layout& src, const Layout& dst, DType t) {
  std::vector<Plan> plans;
  PlanOptions o;
  Plan automatic = make_plan(src, dst, t, o);
  for (const Candidate& c : automatic.candidates()) {
    if (!c.available) continue;
    o.strategy = c.strategy;
    o.transport = c.transport;  // every candidate: both transports
    if (c.transport != Transport::kNvlink) {
      plans.push_back(make_plan(src, dst, t, o));
      continue;
    }
    for (Fusion f : {Fusion::kNever, Fusion::kAlways}) {  // nvlink: separate peer copies and one fused kernel
      o.fusion = f;
      plans.push_back(make_plan(src, dst, t, o));
    }
    o.fusion = Fusion::kAuto;
  }
  return plans;
}

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
            for (const Plan& plan : plans_for(Layout(mesh, from, shape), Layout(mesh, to, shape), t)) check(plan);
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

TEST_F(Gpu, EveryDType) {
  Mesh mesh({2});
  for (const char* pair : {"S0>S1", "S1>S0", "S0>R", "R>S1", "S1>R"}) {
    std::string p(pair);
    auto gt = p.find('>');
    for (const Dims& shape : light() ? std::vector<Dims>{Dims{3, 5}, Dims{64, 3, 7}}
                                     : std::vector<Dims>{Dims{3, 5}, Dims{4099, 257}, Dims{64, 3, 7}}) {
      Layout src(mesh, parse_placements(p.substr(0, gt)), shape), dst(mesh, parse_placements(p.substr(gt + 1)), shape);
      for (DType t : kAllDTypes)
        for (const Plan& plan : plans_for(src, dst, t)) check(plan);
    }
  }
}

// Partial sources and targets over NCCL: every pair of R, S0, S1 and P(op) for every op, every available strategy
// (the p2p reduction runs in the CUDA unpack kernel), exact for integers, within partial_tolerance for floats.
// Mesh (2) over shapes and dtypes; meshes (1,2) and (2,1) (size-1 dims) on one small shape.
TEST_F(Gpu, PartialEveryPairAndStrategy) {
  struct Sweep {
    std::vector<int> mesh;
    std::vector<Dims> shapes;
    std::vector<DType> dtypes;
  };
  std::vector<Sweep> sweeps{
      {{2}, {Dims{1, 1}, Dims{7, 5}, Dims{1000, 1003}}, {DType::kF32, DType::kBF16, DType::kI32, DType::kF16}},
      {{1, 2}, {Dims{7, 5}}, {DType::kF32}},
      {{2, 1}, {Dims{7, 5}}, {DType::kI32}}};
  std::vector<ReduceOp> ops{ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin};
  if (light()) {
    sweeps = {{{2}, {Dims{7, 5}, Dims{64, 33}}, {DType::kF32, DType::kBF16}}, {{1, 2}, {Dims{7, 5}}, {DType::kF32}}};
    ops = {ReduceOp::kSum, ReduceOp::kMax};
  }
  for (ReduceOp op : ops) {
    for (const Sweep& sw : sweeps) {
      Mesh mesh(sw.mesh);
      std::vector<std::vector<Placement>> all{{}};
      for (int k = 0; k < mesh.ndim(); ++k) {
        std::vector<std::vector<Placement>> next;
        for (const auto& p : all)
          for (Placement q :
               {Placement::replicate(), Placement::shard(0), Placement::shard(1), Placement::partial(op)}) {
            next.push_back(p);
            next.back().push_back(q);
          }
        all = std::move(next);
      }
      for (const Dims& shape : sw.shapes)
        for (const auto& from : all)
          for (const auto& to : all) {
            bool partial = false;
            for (const auto* ps : {&from, &to})
              for (const Placement& p : *ps) partial = partial || p.is_partial();
            if (!partial) continue;
            for (DType t : sw.dtypes)
              for (const Plan& plan : plans_for(Layout(mesh, from, shape), Layout(mesh, to, shape), t)) check(plan);
          }
    }
  }
}

// A memory budget of 1/8 of the received bytes: the executor's workspace (measured) stays within it.
TEST_F(Gpu, MemoryBudgetIsHonoured) {
  Mesh mesh({2});
  const Dims shape = light() ? Dims{256, 192} : Dims{4096, 4096};
  for (const char* pair : {"S0>S1", "P>S0", "S1>S0"}) {
    std::string p(pair);
    auto gt = p.find('>');
    Layout src(mesh, parse_placements(p.substr(0, gt)), shape), dst(mesh, parse_placements(p.substr(gt + 1)), shape);
    PlanOptions o;
    const Index received = shape[0] * shape[1] * 4 / 4;  // S0 -> S1: a quarter of the tensor crosses into a rank
    o.memory_budget_bytes = received / 8;
    Plan plan = make_plan(src, dst, DType::kF32, o);
    RunResult r = check(plan);
    EXPECT_LE(static_cast<Index>(r.workspace_bytes), received / 8) << pair;
    RunOptions serial = quick();
    serial.stage_overlap = StageOverlap::kSerial;
    check(plan, serial);
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
    for (const Plan& plan : plans_for(src, dst, DType::kF32)) {
      RunResult r = check(plan, o);
      std::printf("  1 GiB f32 %-6s %-10s %9.1f us\n", pair, std::string(to_string(plan.strategy())).c_str(),
                  r.median_us);
    }
  }
  Layout src(mesh, parse_placements("S0"), Dims{16384, 32768});  // bf16: 1 GiB
  for (const Plan& plan : plans_for(src, src.with_placements(parse_placements("S1")), DType::kBF16)) check(plan, o);
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
      for (const Plan& plan : plans_for(src, src.with_placements(pt), DType::kBF16)) check(plan, o);
    }
  }
}

TEST_F(Gpu, ZeroCopyPathsSendAndReceiveInPlace) {
  Plan plan = testing::p2p_over_nccl(Layout(Mesh({2}), parse_placements("S0"), Dims{4096, 1024}), "R", DType::kF32);
  for (int r = 0; r < 2; ++r) {
    RankProgram p = lower(plan, r);
    const Exchange* x = nullptr;
    for (const Op& op : p.ops) {
      if (const auto* c = std::get_if<Copies>(&op.body)) {
        EXPECT_EQ(c->regions.size(), 1u);  // the local block only
      }
      if (const auto* e = std::get_if<Exchange>(&op.body)) x = e;
    }
    ASSERT_NE(x, nullptr);
    EXPECT_EQ(x->sends[0].buffer.buffer, Buffer::kInput);
    EXPECT_EQ(x->recvs[0].buffer.buffer, Buffer::kOutput);
  }
  check(plan);
}

}  // namespace
}  // namespace reshard
