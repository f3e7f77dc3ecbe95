// Plans for callers whose tensors change every call (PlanOptions::buffers_change): a first step on nvlink is staged
// (every sending rank copies its source tensor into its workspace, where the peers read it) when that local copy costs
// less than mapping the peers' new tensors (Profile::nvlink.map_us per (rank, peer it reads) pair), and otherwise
// carries the mapping's cost; staged plans move every element right, and both survive plan JSON with their figures
// recomputed.
#include <gtest/gtest.h>

#include <string>

#include "host_runs.hpp"
#include "reshard/cost_model.hpp"
#include "reshard/harness.hpp"
#include "reshard/plan_batch.hpp"
#include "reshard/plan_json.hpp"
#include "reshard/planner.hpp"

namespace reshard {
namespace {

PlanOptions for_changing_buffers(Fusion fusion = Fusion::kAuto) {
  PlanOptions o;
  o.strategy = Strategy::kP2P;
  o.transport = Transport::kNvlink;
  o.fusion = fusion;
  o.buffers_change = true;
  return o;
}

const Step& first(const Plan& p) { return p.steps().front(); }

// The staging copy is one contiguous copy of the largest rank's source tensor on the copy engines; staging wins
// where it is cheaper than mapping (on mesh (2) S0 -> S1 each rank reads one peer: two pairs of map_us), and each
// choice carries its own cost in the estimate.
TEST(StagedPlans, StagingIsChosenWhereItCostsLessThanMapping) {
  const Profile profile = default_profile();
  const CostModel model(profile, Topology{});
  for (const Dims& shape : {Dims{1024, 1024}, Dims{16384, 16384}}) {  // 4 MiB and 1 GiB of f32
    const Layout src(Mesh({2}), parse_placements("S0"), shape);
    const Layout dst = src.with_placements(parse_placements("S1"));
    PlanOptions fixed = for_changing_buffers(Fusion::kNever);
    fixed.buffers_change = false;
    const Plan on_fixed = make_plan(src, dst, DType::kF32, fixed);
    const Plan changing = make_plan(src, dst, DType::kF32, for_changing_buffers(Fusion::kNever));
    const Index tensor = src.local_volume(0) * 4;
    const double staging_us = model.copy_engine_us(tensor);
    const double mapping_us = 2 * profile.nvlink.map_us;
    const bool want_staged = staging_us < mapping_us;
    EXPECT_EQ(want_staged, shape[0] == 1024) << "staging " << staging_us << " us, mapping " << mapping_us;
    EXPECT_EQ(first(changing).staged, want_staged) << plan_to_json(changing);
    EXPECT_FALSE(first(on_fixed).staged);
    EXPECT_TRUE(changing.buffers_change());
    EXPECT_NEAR(changing.estimated_us(), on_fixed.estimated_us() + (want_staged ? staging_us : mapping_us),
                1e-9 * changing.estimated_us());
    // A staged step's workspace holds a copy of the source tensor; an unstaged nvlink step needs none.
    EXPECT_EQ(on_fixed.peak_workspace_bytes(), 0);
    EXPECT_EQ(changing.peak_workspace_bytes(), want_staged ? tensor : 0);
  }
}

// Steps that read no caller tensor of a peer are left alone: a plan on nccl, and a local redistribution.
TEST(StagedPlans, OnlyNvlinkStepsThatMoveDataAreStaged) {
  const Layout src(Mesh({2}), parse_placements("S0"), Dims{64, 48});
  PlanOptions o = for_changing_buffers();
  o.transport = Transport::kNccl;
  EXPECT_FALSE(first(make_plan(src, src.with_placements(parse_placements("S1")), DType::kF32, o)).staged);
  const Layout rep = src.with_placements(parse_placements("R"));
  const Plan local = make_plan(rep, src, DType::kF32, for_changing_buffers());  // R -> S0: nothing crosses
  for (const Step& s : local.steps()) EXPECT_FALSE(s.staged) << plan_to_json(local);
}

// Every pair of R/S0/S1/P on meshes (2), (4), (2,2) at sizes with empty, single and uneven shards, staged, fused and
// not: every element of every rank right (the host backend's harness checks them all).
TEST(StagedPlans, StagedPlansMoveEveryElement) {
  int staged = 0;
  for (const std::vector<int>& m : {std::vector<int>{2}, {4}, {2, 2}}) {
    const Mesh mesh(m);
    for (const Dims& shape : {Dims{1, 1}, Dims{7, 5}, Dims{0, 3}}) {
      for (const char* from : {"R", "S0", "S1", "P"}) {
        for (const char* to : {"R", "S0", "S1"}) {
          std::string f = from, t = to;
          if (m.size() == 2) f += std::string(",") + from, t += std::string(",") + to;
          const Layout src(mesh, parse_placements(f), shape), dst(mesh, parse_placements(t), shape);
          for (Fusion fusion : {Fusion::kNever, Fusion::kAlways}) {
            const Plan plan = make_plan(src, dst, DType::kF32, for_changing_buffers(fusion));
            staged += first(plan).staged;
            const RunResult r = run_plan(plan, testing::quick_host_run());
            EXPECT_EQ(r.wrong_elements, 0) << src.str() << " -> [" << t << "]: " << plan_to_json(plan);
          }
        }
      }
    }
  }
  EXPECT_GT(staged, 50);  // tiny tensors: staging always wins
}

TEST(StagedPlans, SurviveJsonAndRefuseInconsistentSteps) {
  const Layout src(Mesh({2}), parse_placements("S0"), Dims{64, 48});
  const Plan plan = make_plan(src, src.with_placements(parse_placements("S1")), DType::kF32, for_changing_buffers());
  ASSERT_TRUE(first(plan).staged);
  const std::string text = plan_to_json(plan);
  EXPECT_NE(text.find("\"buffers_change\": true"), std::string::npos) << text;
  EXPECT_NE(text.find("\"staged\": true"), std::string::npos) << text;
  const Plan back = plan_from_json(text, default_profile());  // figures recomputed: staged, as planned
  EXPECT_TRUE(back.buffers_change());
  EXPECT_TRUE(first(back).staged);
  EXPECT_DOUBLE_EQ(back.estimated_us(), plan.estimated_us());
  EXPECT_EQ(back.peak_workspace_bytes(), plan.peak_workspace_bytes());
  EXPECT_EQ(plan_to_json(back), text);

  std::string unflagged = text;
  unflagged.replace(unflagged.find("\"buffers_change\": true"), 22, "\"buffers_change\": false");
  try {
    plan_from_json(unflagged);
    ADD_FAILURE() << "a staged step in a plan for fixed buffers was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("step 0 is staged, but the plan is not for changing buffers"),
              std::string::npos)
        << e.what();
  }
}

// A loaded plan that stages a step moving nothing (R -> S0 on nvlink: local copies only) is refused: the staged copy's
// workspace would not be priced.
TEST(StagedPlans, AStagedStepThatMovesNothingIsRefused) {
  const Layout rep(Mesh({2}), parse_placements("R"), Dims{8, 6});
  const Plan plan = make_plan(rep, rep.with_placements(parse_placements("S0")), DType::kF32, for_changing_buffers());
  ASSERT_EQ(plan.bytes_moved(), 0);
  ASSERT_EQ(plan.steps().front().transport, Transport::kNvlink) << plan_to_json(plan);
  std::string text = plan_to_json(plan);
  const std::string p2p = "\"kind\": \"p2p\",";
  ASSERT_NE(text.find(p2p), std::string::npos) << text;
  text.replace(text.find(p2p), p2p.size(), p2p + " \"staged\": true,");
  try {
    plan_from_json(text);
    ADD_FAILURE() << "a staged step that moves nothing was accepted: " << text;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("step 0 is staged, but it moves no data between ranks"), std::string::npos)
        << e.what();
  }
}

// Whether a plan's first step reads the caller's tensors in the peers (one-sided, not staged): a run maps them.
bool maps_callers_tensors(const Plan& p) { return first(p).transport == Transport::kNvlink && !first(p).staged; }

// Mapping is priced per (rank, peer it reads) pair, so a tensor whose staging costs more than mapping it on mesh (2)
// (two pairs) stages on mesh (4), where S0 -> S1 has every rank read three peers (twelve pairs).
TEST(StagedPlans, MappingIsPricedPerRankAndPeerItReads) {
  PlanOptions o = for_changing_buffers(Fusion::kNever);
  const CostModel model(o.profile, Topology{});
  const auto staging_us = [&](const Layout& l) { return model.copy_engine_us(l.local_volume(0) * 4); };
  const Layout two(Mesh({2}), parse_placements("S0"), Dims{4096, 4096});
  const Layout four(Mesh({4}), parse_placements("S0"), Dims{4096, 4096});
  o.profile.nvlink.map_us = staging_us(four) / 6;  // twelve pairs cost twice the staging on (4)
  ASSERT_GT(staging_us(two), 2 * o.profile.nvlink.map_us);  // two pairs cost less than the staging on (2)
  const Plan on_two = make_plan(two, two.with_placements(parse_placements("S1")), DType::kF32, o);
  const Plan on_four = make_plan(four, four.with_placements(parse_placements("S1")), DType::kF32, o);
  EXPECT_TRUE(maps_callers_tensors(on_two)) << plan_to_json(on_two);
  EXPECT_FALSE(maps_callers_tensors(on_four)) << plan_to_json(on_four);
  for (const Plan* p : {&on_two, &on_four}) {
    const RunResult r = run_plan(*p, testing::quick_host_run());
    EXPECT_EQ(r.wrong_elements, 0) << r.first_error;
  }
}

// A batch on changing buffers plans each member as it would be alone (each fresh tensor is an allocation of its own,
// opened by every peer that reads it), except that a member that would stage runs on NCCL: the same plan as alone
// otherwise, every element right.
TEST(StagedPlans, ABatchPricesMappingPerMember) {
  PlanOptions o;  // strategy and transport auto
  o.buffers_change = true;
  std::vector<BatchEntry> entries;
  for (const Dims& shape : {Dims{1024, 1024}, Dims{64, 48}, Dims{4096, 4096}}) {
    const Layout src(Mesh({2}), parse_placements("S0"), shape);
    entries.push_back(BatchEntry{src, src.with_placements(parse_placements("S1")), DType::kF32});
  }
  const PlanBatch batch = make_plan_batch(entries, o);
  ASSERT_EQ(batch.size(), entries.size());
  int staged_alone = 0;
  for (size_t t = 0; t < batch.size(); ++t) {
    const Plan alone = make_plan(entries[t].src, entries[t].dst, DType::kF32, o);
    EXPECT_FALSE(first(batch.plan(t)).staged) << "tensor " << t;
    if (first(alone).staged) {
      ++staged_alone;
      PlanOptions nccl = o;
      nccl.transport = Transport::kNccl;
      EXPECT_EQ(plan_to_json(batch.plan(t)), plan_to_json(make_plan(entries[t].src, entries[t].dst, DType::kF32, nccl)))
          << "tensor " << t;
    } else {
      EXPECT_EQ(plan_to_json(batch.plan(t)), plan_to_json(alone)) << "tensor " << t;
    }
  }
  EXPECT_GT(staged_alone, 0);
  const RunResult r = run_batch(batch, testing::quick_host_run());
  EXPECT_EQ(r.wrong_elements, 0) << r.first_error;
  Index elements = 0;
  for (const BatchEntry& e : entries) elements += e.src.global_volume();
  EXPECT_EQ(r.checked_elements, 3 * elements);
}

}  // namespace
}  // namespace reshard
