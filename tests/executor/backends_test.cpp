// The executor's checks that hold on every backend, written once and run on each (value-parameterised over Backend):
// every dtype on every strategy and transport, zero-copy p2p steps, memory budgets (plans pipelined within the
// budget, stages in lanes and serial) and Partial sources and targets of every reduce op. Every element of every rank
// is checked (harness protocol: two poisoned runs and a final run).
//
// Each backend runs every case whose mesh it can hold: the host backend (executor_tests) every one; NCCL
// (executor_gpu_tests, built with CUDA: one GPU per rank on a 2-rank runner, skipped where fewer than 2 GPUs are
// visible) those on 2 ranks. The sweeps written for GPUs use their large shapes on NCCL (small ones in light mode,
// RESHARD_GPU_TESTS_LIGHT=1) and on the host in the full tier (RESHARD_TEST_TIER=full). What one backend alone runs:
// executor_host_test.cpp (the exhaustive enumeration) and gpu/executor_gpu_test.cpp (pulls, 1 GiB tensors, CUDA
// graphs).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "gpu_fixture.hpp"
#include "host_runs.hpp"
#include "placement_sets.hpp"
#include "reshard/executor.hpp"
#include "reshard/harness.hpp"
#include "reshard/overlap.hpp"
#include "reshard/planner.hpp"
#include "test_plans.hpp"
#include "test_tier.hpp"

namespace reshard {
namespace {

class ExecutorOn : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (nccl() && local_gpu_count() < 2) GTEST_SKIP() << "needs 2 GPUs; " << local_gpu_count() << " visible";
  }
  static void TearDownTestSuite() {
    delete nccl_runner_;
    nccl_runner_ = nullptr;
  }

  bool nccl() const { return GetParam() == Backend::kNccl; }
  // Whether this backend runs plans on `mesh`: the host backend any mesh, NCCL its runner's 2 ranks.
  bool runs(const Mesh& mesh) const { return !nccl() || mesh.size() == 2; }
  // The small shapes, dtypes and ops of the sweeps written for GPUs: on NCCL in light mode (runs under
  // compute-sanitizer), on the host except in the full tier (its own suites cover these layouts; the large shapes are
  // for the GPUs' bandwidth).
  bool light() const { return nccl() ? testing::light() : !testing::full_tier(); }

  // One verified run without warm-up: on the host backend in a fresh runner, on NCCL in the suite's runner (its
  // verified runs counted for the GPU SUMMARY line executor_gpu_tests prints).
  RunOptions quick() const {
    if (!nccl()) return testing::quick_host_run();
    RunOptions o;
    o.warmup = 0;
    o.iters = 1;
    return o;
  }
  RunResult check(const Plan& plan) { return check(plan, quick()); }
  RunResult check(const Plan& plan, const RunOptions& options) {
    RunResult r;
    if (nccl()) {
      if (nccl_runner_ == nullptr) nccl_runner_ = new LocalRunner(Backend::kNccl, 2, std::chrono::seconds(60));
      r = nccl_runner_->run(plan, options);
      ++testing::g_runs;
      testing::g_checked += r.checked_elements;
      testing::g_wrong += r.wrong_elements;
    } else {
      r = run_plan(plan, options);
    }
    EXPECT_EQ(r.wrong_elements, 0) << plan.src().str() << " -> [" << to_string(plan.dst().placements()) << "] "
                                   << to_string(plan.dtype()) << " " << to_string(plan.strategy()) << ": "
                                   << r.first_error;
    return r;
  }

  inline static LocalRunner* nccl_runner_ = nullptr;
};

// Every dtype: mesh (2,3) from [S0, S1] to four layouts on every strategy (hybrid where it has a plan), and mesh (2)
// between R, S0 and S1 on every candidate's plan (both transports; nvlink fused and not), up to 4099 x 257.
TEST_P(ExecutorOn, EveryDTypeAndStrategy) {
  const Layout src(Mesh({2, 3}), parse_placements("S0,S1"), Dims{11, 13, 3});
  if (runs(src.mesh())) {
    for (const char* to : {"S1,S0", "R,S2", "S2,R", "R,R"}) {
      const Layout dst = src.with_placements(parse_placements(to));
      for (DType t : kAllDTypes) {
        for (Strategy s : {Strategy::kCollective, Strategy::kP2P, Strategy::kHybrid, Strategy::kAuto}) {
          std::string why;
          const std::optional<Plan> plan = testing::plan_with(src, dst, t, s, why);
          if (!plan) {
            ASSERT_EQ(s, Strategy::kHybrid) << why;
            continue;
          }
          check(*plan);
        }
      }
    }
  }
  const Mesh mesh({2});
  for (const char* pair : {"S0>S1", "S1>S0", "S0>R", "R>S1", "S1>R"}) {
    const std::string p(pair);
    const size_t gt = p.find('>');
    for (const Dims& shape : light() ? std::vector<Dims>{Dims{3, 5}, Dims{64, 3, 7}}
                                     : std::vector<Dims>{Dims{3, 5}, Dims{4099, 257}, Dims{64, 3, 7}}) {
      const Layout from(mesh, parse_placements(p.substr(0, gt)), shape);
      const Layout to(mesh, parse_placements(p.substr(gt + 1)), shape);
      for (DType t : kAllDTypes)
        for (const Plan& plan : testing::candidate_plans(from, to, t)) check(plan);
    }
  }
}

// p2p plans on the NCCL transport send straight from the input buffer and receive straight into the output buffer
// where a transfer is a rank's whole box: nothing is packed, and every element is right.
TEST_P(ExecutorOn, ZeroCopyStepsSendAndReceiveInPlace) {
  // Mesh (2,2), [S0, S1] -> [S1, S0]: ranks 1 and 2 swap their boxes; ranks 0 and 3 only copy locally.
  const Plan swap =
      testing::p2p_over_nccl(Layout(Mesh({2, 2}), parse_placements("S0,S1"), Dims{64, 64}), "S1,S0", DType::kF32);
  for (int r = 0; r < 4; ++r) {
    const RankProgram p = lower(swap, r);
    int exchanges = 0, copies = 0;
    for (const Op& op : p.ops) {
      exchanges += std::holds_alternative<Exchange>(op.body);
      copies += std::holds_alternative<Copies>(op.body);
    }
    EXPECT_EQ(copies, r == 1 || r == 2 ? 0 : 1) << "rank " << r;  // ranks 0 and 3 only copy locally: nothing packed
    EXPECT_EQ(exchanges, r == 1 || r == 2 ? 1 : 0) << "rank " << r;
  }
  if (runs(swap.src().mesh())) check(swap);
  // Mesh (2), S0 -> R: each rank sends its box from its input and receives the other's into its output; its one copy
  // is the local block.
  const Plan gather =
      testing::p2p_over_nccl(Layout(Mesh({2}), parse_placements("S0"), Dims{4096, 1024}), "R", DType::kF32);
  for (int r = 0; r < 2; ++r) {
    const RankProgram p = lower(gather, r);
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
  check(gather);
}

// The most bytes any rank receives from others under the p2p source choice.
Index max_received(const Layout& src, const Layout& dst, int es) {
  OverlapIndex index(src, dst, Topology{}, es);
  Index most = 0;
  for (int r = 0; r < src.mesh().size(); ++r) {
    std::vector<Transfer> in;
    index.transfers_into(r, in);
    Index bytes = 0;
    for (const Transfer& t : in)
      if (!t.is_local()) bytes += t.bytes;
    most = std::max(most, bytes);
  }
  return most;
}

// Memory budgets: plans over budget are pipelined in chunks whose scratch rotates through two slots; the executor's
// allocated workspace (measured) stays within the budget, and every element is right with the pipeline's stages in
// lanes and serial.
TEST_P(ExecutorOn, MemoryBudgetIsHonoured) {
  // A budget of an eighth of the most bytes a rank receives, on the staged (NCCL) transport: the plan's workspace is
  // within it (chunked where it must be) and the executor allocates exactly that.
  struct Case {
    testing::LayoutCase layout;
    DType dtype;
  };
  const Case cases[] = {
      {{{2}, "S0", "S1", {256, 192}}, DType::kF32},
      {{{2, 2}, "S0,S1", "S1,S0", {128, 200}}, DType::kBF16},
      {{{4}, "P", "S0", {256, 96}}, DType::kI32},
      {{{4}, "S1", "S0", {301, 277}}, DType::kF32},
      {{{2, 2}, "P,P", "S0,S1", {256, 128}}, DType::kF32},
      {{{3}, "S0", "S1", {450, 190}}, DType::kI8},
      {{{2, 2}, "S0,S0", "S1,S1", {128, 256}}, DType::kF64},
  };
  int chunked = 0;
  for (const Case& c : cases) {
    const Layout src = c.layout.src(), dst = c.layout.dst();
    const Index budget = max_received(src, dst, element_size(c.dtype)) / 8;
    ASSERT_GT(budget, 0);
    PlanOptions unlimited;
    unlimited.transport = Transport::kNccl;  // the staged transport: budgets pipeline it
    const Plan free_plan = make_plan(src, dst, c.dtype, unlimited);
    const bool needs_chunking = free_plan.peak_workspace_bytes() > budget;
    chunked += needs_chunking;
    PlanOptions o = unlimited;
    o.memory_budget_bytes = budget;
    const Plan plan = make_plan(src, dst, c.dtype, o);
    EXPECT_LE(plan.peak_workspace_bytes(), budget) << src.str();
    if (needs_chunking) {
      EXPECT_GT(plan.pipeline_chunk_bytes(), 0) << src.str();
    }
    if (!runs(src.mesh())) continue;
    const RunResult r = check(plan);
    EXPECT_LE(static_cast<Index>(r.workspace_bytes), budget) << src.str() << " -> " << c.layout.to;  // measured
    EXPECT_EQ(static_cast<Index>(r.workspace_bytes), plan.peak_workspace_bytes()) << src.str();
    RunOptions serial = quick();
    serial.stage_schedule = StageSchedule::kSerial;  // the same slots, stage after stage
    check(plan, serial);
  }
  EXPECT_GE(chunked, 5);  // most cases need chunking to fit
  // Mesh (2), auto's plan under a budget of an eighth of the bytes S0 -> S1 moves into a rank, up to 4096 x 4096 f32.
  const Mesh mesh({2});
  const Dims shape = light() ? Dims{256, 192} : Dims{4096, 4096};
  for (const char* pair : {"S0>S1", "P>S0", "S1>S0"}) {
    const std::string p(pair);
    const size_t gt = p.find('>');
    const Layout src(mesh, parse_placements(p.substr(0, gt)), shape);
    const Layout dst(mesh, parse_placements(p.substr(gt + 1)), shape);
    PlanOptions o;
    const Index received = shape[0] * shape[1] * 4 / 4;  // S0 -> S1: a quarter of the tensor crosses into a rank
    o.memory_budget_bytes = received / 8;
    const Plan plan = make_plan(src, dst, DType::kF32, o);
    const RunResult r = check(plan);
    EXPECT_LE(static_cast<Index>(r.workspace_bytes), received / 8) << pair;
    RunOptions serial = quick();
    serial.stage_schedule = StageSchedule::kSerial;
    check(plan, serial);
  }
}

// Partial sources and targets: every pair of R, S0, S1 and P(op) for every op, every available strategy (on GPUs the
// p2p reduction runs in the CUDA unpack kernel), exact for integers, within partial_tolerance for floats. Mesh (2)
// over shapes and dtypes; meshes (1,2) and (2,1) (size-1 dims) on one small shape.
TEST_P(ExecutorOn, PartialEveryPairAndStrategy) {
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
      const Mesh mesh(sw.mesh);
      const auto all = testing::placement_lists(
          mesh.ndim(), {Placement::replicate(), Placement::shard(0), Placement::shard(1), Placement::partial(op)});
      for (const Dims& shape : sw.shapes)
        for (const auto& from : all)
          for (const auto& to : all) {
            bool partial = false;
            for (const auto* ps : {&from, &to})
              for (const Placement& p : *ps) partial = partial || p.is_partial();
            if (!partial) continue;
            for (DType t : sw.dtypes)
              for (const Plan& plan : testing::candidate_plans(Layout(mesh, from, shape), Layout(mesh, to, shape), t))
                check(plan);
          }
    }
  }
}

// This binary's backend: NCCL in executor_gpu_tests (RESHARD_TEST_BACKEND_NCCL), the host backend in executor_tests.
#ifdef RESHARD_TEST_BACKEND_NCCL
constexpr Backend kBackend = Backend::kNccl;
#else
constexpr Backend kBackend = Backend::kHost;
#endif
INSTANTIATE_TEST_SUITE_P(Backend, ExecutorOn, ::testing::Values(kBackend),
                         [](const ::testing::TestParamInfo<Backend>& p) { return std::string(to_string(p.param)); });

}  // namespace
}  // namespace reshard
