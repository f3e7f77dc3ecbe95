// Low-SM mode (PlanOptions::low_sm): SM kernels are priced at the profile's low_sm_kernel_factor, so auto moves from
// a kernel path that is faster alone to the copy-engine nvlink path; the plans it picks run correctly on the host
// backend, and the mode survives plan JSON and the profile's JSON. Its copy-engine copies go in pieces, in a step's
// later phases too.
#include <gtest/gtest.h>

#include <algorithm>
#include <utility>

#include "host_runs.hpp"
#include "reshard/cost_model.hpp"
#include "reshard/harness.hpp"
#include "reshard/plan_json.hpp"
#include "reshard/planner.hpp"
#include "reshard/program.hpp"

namespace reshard {
namespace {

// Every fixed cost zero, so that the prices are bytes / bandwidth: NCCL's all-gather (400 GB/s) 5% faster than the
// copy engines pulling over NVLink (380 GB/s), the kernels (send/recv, nvlink kernel pull, fused) slower still.
Profile kernel_faster_alone() {
  Profile p = default_profile();
  p.name = "low-sm-test";
  for (LinkProfile* l : {&p.intra_node, &p.inter_node})
    for (AlphaBeta* ab : {&l->p2p, &l->all_gather, &l->reduce_scatter, &l->all_reduce, &l->all_to_all})
      ab->alpha_us = 0;
  // Bandwidths (GB/s) of the paths compared, every latency and overhead zero.
  for (auto [ab, bandwidth] : {std::pair{&p.intra_node.all_gather, 400.0},
                               {&p.intra_node.p2p, 300.0},
                               {&p.copy, 2100.0},
                               {&p.copy_engine, 2100.0},
                               {&p.nvlink.copy_engine, 380.0},
                               {&p.nvlink.kernel, 300.0},
                               {&p.nvlink.fused, 250.0}})
    *ab = AlphaBeta{0, bandwidth};
  for (double* overhead : {&p.p2p_per_peer_us, &p.step_overhead_us, &p.nvlink.sync_us, &p.nvlink.step_overhead_us,
                           &p.nvlink.fused_overhead_us})
    *overhead = 0;
  p.nvlink.copy_engine_min_row_bytes = 0;
  p.low_sm_kernel_factor = 1.22;
  return p;
}

bool uses_nvlink_copy_engines(const Plan& plan) {
  bool any = false;
  for (const Step& s : plan.steps()) {
    if (!is_communication(s.kind)) continue;
    if (s.transport != Transport::kNvlink || s.fused) return false;
    any = true;
  }
  return any;
}

const Candidate& candidate(const Plan& plan, Strategy strategy, Transport transport) {
  for (const Candidate& c : plan.candidates())
    if (c.strategy == strategy && c.available && (strategy == Strategy::kCollective || c.transport == transport))
      return c;
  throw std::runtime_error(cat("no available candidate ", to_string(strategy), "/", to_string(transport)));
}

TEST(LowSm, AutoPrefersTheCopyEnginesUnderCompute) {
  const Layout src(Mesh({2}), parse_placements("S0"), Dims{64, 256});
  const Layout dst = src.with_placements(parse_placements("R"));
  PlanOptions o;
  o.profile = kernel_faster_alone();
  const Plan alone = make_plan(src, dst, DType::kF32, o);
  o.low_sm = true;
  const Plan beside = make_plan(src, dst, DType::kF32, o);

  // Alone: the all-gather (a NCCL kernel) is the fastest; in low-SM mode the copy engines' pull.
  EXPECT_EQ(alone.strategy(), Strategy::kCollective) << plan_to_json(alone);
  EXPECT_FALSE(uses_nvlink_copy_engines(alone));
  EXPECT_FALSE(alone.low_sm());
  EXPECT_TRUE(uses_nvlink_copy_engines(beside)) << plan_to_json(beside);
  EXPECT_TRUE(beside.low_sm());

  // The all-gather is all SM time: its price grows by the factor exactly; the copy-engine pull's does not change.
  const double gather = candidate(alone, Strategy::kCollective, Transport::kNccl).estimated_us;
  EXPECT_GT(gather, 0);
  EXPECT_NEAR(candidate(beside, Strategy::kCollective, Transport::kNccl).estimated_us, 1.22 * gather, 1e-9 * gather);
  EXPECT_LT(gather, beside.estimated_us());  // faster alone than what low-SM mode picked
  EXPECT_LT(beside.estimated_us(), 1.22 * gather);

  // Both picks move every element right.
  EXPECT_EQ(run_plan(alone, testing::quick_host_run()).wrong_elements, 0);
  RunResult r = run_plan(beside, testing::quick_host_run());
  EXPECT_EQ(r.wrong_elements, 0);
  EXPECT_GT(r.checked_elements, 0);
}

// Low-SM plans issue copy-engine copies in pieces of at most 16 MiB (tests/planner/lowering_test.cpp checks the
// pieces): with f64 blocks of 18 MiB, local and peer copies (pulled and pushed) are split, and every element still
// lands right.
TEST(LowSm, CopiesInPiecesMoveEveryElement) {
  const Layout src(Mesh({2}), parse_placements("S0"), Dims{2048, 4608});
  struct Case {
    const char* to;
    Transport transport;
    OneSidedCopies copies;
  };
  for (const Case& c :
       {Case{"S1", Transport::kNccl, OneSidedCopies::kPull}, Case{"S1", Transport::kNvlink, OneSidedCopies::kPull},
        Case{"S1", Transport::kNvlink, OneSidedCopies::kPush}, Case{"R", Transport::kNvlink, OneSidedCopies::kPush}}) {
    PlanOptions o;
    o.strategy = Strategy::kP2P;
    o.transport = c.transport;
    o.fusion = Fusion::kNever;
    o.low_sm = true;
    const Layout dst = src.with_placements(parse_placements(c.to));
    const Plan plan = make_plan(src, dst, DType::kF64, o);
    RunOptions run = testing::quick_host_run();
    run.one_sided_copies = c.copies;
    const RunResult r = run_plan(plan, run);
    EXPECT_EQ(r.wrong_elements, 0) << c.to << " " << to_string(c.transport) << ": " << r.first_error;
    const Index held = dst.global_volume() * (c.to[0] == 'R' ? 2 : 1);  // every rank's target, once per check
    EXPECT_GE(r.checked_elements, held) << c.to;
    EXPECT_EQ(r.checked_elements % held, 0) << c.to;
  }
}

TEST(LowSm, CostModelScalesOnlySmWork) {
  Profile p = kernel_faster_alone();
  const CostModel alone(p, Topology{}), beside(p, Topology{}, true);
  const Index bytes = Index(1) << 20;
  EXPECT_DOUBLE_EQ(beside.copy_us(bytes), 1.22 * alone.copy_us(bytes));
  EXPECT_DOUBLE_EQ(beside.copy_engine_us(bytes), alone.copy_engine_us(bytes));
  EXPECT_DOUBLE_EQ(beside.all_gather_us(2, bytes, LinkClass::kIntraNode),
                   1.22 * alone.all_gather_us(2, bytes, LinkClass::kIntraNode));
  RankTraffic engine;  // an nvlink step pulling on the copy engines: unchanged
  engine.in_bytes[0] = engine.engine_in_bytes = bytes;
  engine.engine_calls = 1;
  engine.peers_in = 1;
  EXPECT_DOUBLE_EQ(beside.one_sided_rank_us(engine), alone.one_sided_rank_us(engine));
  RankTraffic kernel = engine;  // the same pulled by a kernel: scaled
  kernel.engine_in_bytes = 0;
  kernel.engine_calls = 0;
  kernel.kernel_in_bytes = bytes;
  EXPECT_DOUBLE_EQ(beside.one_sided_rank_us(kernel), 1.22 * alone.one_sided_rank_us(kernel));
}

TEST(LowSm, SurvivesPlanAndProfileJson) {
  const Layout src(Mesh({2}), parse_placements("S0"), Dims{64, 256});
  PlanOptions o;
  o.profile = kernel_faster_alone();
  o.low_sm = true;
  const Plan plan = make_plan(src, src.with_placements(parse_placements("R")), DType::kF32, o);
  const std::string text = plan_to_json(plan);
  EXPECT_NE(text.find("\"low_sm\": true"), std::string::npos) << text;
  const Plan back = plan_from_json(text, o.profile);  // summary figures recomputed in low-SM mode
  EXPECT_TRUE(back.low_sm());
  EXPECT_DOUBLE_EQ(back.estimated_us(), plan.estimated_us());

  const Profile p = profile_from_json(profile_to_json(o.profile));
  EXPECT_DOUBLE_EQ(p.low_sm_kernel_factor, 1.22);
  std::string bad = profile_to_json(o.profile);
  bad.replace(bad.find("\"low_sm_kernel_factor\": 1.22"), 28, "\"low_sm_kernel_factor\": 0.5");
  try {
    profile_from_json(bad);
    ADD_FAILURE() << "a factor below 1 was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("'low_sm_kernel_factor' must be a factor in [1, 100], got 0.5"),
              std::string::npos)
        << e.what();
  }
}

// Later phases of a step too: the gather of a hierarchical all_reduce with one-sided node stages (8192² f32 over two
// nodes of two: 128 MiB pieces) and a relayed step's forwarding pull their peers' pieces in pieces of at most 16 MiB.
TEST(LowSm, PlansIssueLaterPhasesCopyEngineCopiesInPieces) {
  for (const char* from : {"P", "S0"}) {
    const Layout src(Mesh({4}), parse_placements(from), Dims{8192, 8192});
    PlanOptions o;
    o.topology.ranks_per_node = 2;
    o.low_sm = true;
    const Plan plan = make_plan(src, src.with_placements(parse_placements("R")), DType::kF32, o);
    ASSERT_EQ(plan.steps().size(), 1u);
    const Step& s = plan.steps()[0];
    ASSERT_TRUE(s.mixed && (s.hierarchical || s.relayed)) << from << ": " << plan_to_json(plan);
    for (int rank = 0; rank < 4; ++rank) {
      Index engine_bytes = 0, largest = 0;
      for (const Op& op : lower(plan, rank).ops)
        if (const auto* c = std::get_if<Copies>(&op.body); c && c->engine == CopyEngine::kCopyEngine)
          for (const CopyRegion& r : c->regions) {
            engine_bytes += r.shape.product() * 4;
            largest = std::max(largest, r.shape.product() * 4);
          }
      EXPECT_GT(engine_bytes, Index{16} << 20) << from << " rank " << rank;
      EXPECT_EQ(largest, Index{16} << 20) << from << " rank " << rank;
    }
  }
}

}  // namespace
}  // namespace reshard
