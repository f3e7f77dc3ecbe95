// Memory budgets: plans over budget are pipelined in chunks whose scratch rotates through two slots; the
// executor's allocated workspace (measured) stays within the budget and every element is still right.
#include <gtest/gtest.h>

#include "host_runs.hpp"
#include "reshard/harness.hpp"
#include "reshard/overlap.hpp"
#include "reshard/planner.hpp"
#include "test_plans.hpp"

namespace reshard {
namespace {


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

TEST(MemoryBudget, AnEighthOfTheReceivedBytesIsHonouredAndCorrect) {
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
    Plan free_plan = make_plan(src, dst, c.dtype, unlimited);
    const bool needs_chunking = free_plan.peak_workspace_bytes() > budget;
    chunked += needs_chunking;
    PlanOptions o = unlimited;
    o.memory_budget_bytes = budget;
    Plan plan = make_plan(src, dst, c.dtype, o);
    EXPECT_LE(plan.peak_workspace_bytes(), budget) << src.str();
    if (needs_chunking) {
      EXPECT_GT(plan.pipeline_chunk_bytes(), 0) << src.str();
    }
    RunResult r = run_plan(plan, testing::quick_host_run());
    EXPECT_EQ(r.wrong_elements, 0) << src.str() << " -> " << c.layout.to << ": " << r.first_error;
    EXPECT_LE(static_cast<Index>(r.workspace_bytes), budget) << src.str() << " -> " << c.layout.to;  // measured
    EXPECT_EQ(static_cast<Index>(r.workspace_bytes), plan.peak_workspace_bytes()) << src.str();
    RunOptions serial = testing::quick_host_run();
    serial.stage_overlap = StageOverlap::kSerial;  // the same slots, stage after stage
    EXPECT_EQ(run_plan(plan, serial).wrong_elements, 0) << src.str() << " -> " << c.layout.to << " (serial stages)";
  }
  EXPECT_GE(chunked, 5);  // most cases need chunking to fit
}

// Below what the staged path needs, auto still finds the pack-free one-sided plan: no workspace at all.
TEST(MemoryBudget, OneSidedPlansNeedNoWorkspace) {
  Layout src(Mesh({2, 2}), parse_placements("S0,S1"), Dims{128, 200});
  Layout dst = src.with_placements(parse_placements("S1,S0"));
  for (Index budget : {Index(0), Index(100)}) {
    PlanOptions o;
    o.memory_budget_bytes = budget;
    o.strategy = Strategy::kP2P;
    Plan plan = make_plan(src, dst, DType::kF32, o);
    EXPECT_EQ(plan.steps()[0].transport, Transport::kNvlink);
    EXPECT_EQ(plan.peak_workspace_bytes(), 0);
    RunResult r = run_plan(plan, testing::quick_host_run());
    EXPECT_EQ(r.wrong_elements, 0) << r.first_error;
    EXPECT_EQ(r.workspace_bytes, 0u);
  }
}

TEST(MemoryBudget, ABudgetNoPlanMeetsIsAClearError) {
  Layout src(Mesh({2}), parse_placements("S0"), Dims{256, 256});
  Layout dst = src.with_placements(parse_placements("S1"));
  PlanOptions o;
  o.transport = Transport::kNccl;  // (nvlink plans need no workspace)
  o.memory_budget_bytes = 100;
  try {
    make_plan(src, dst, DType::kF32, o);
    ADD_FAILURE() << "a 100-byte budget was met";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("no plan fits the memory budget of 100 bytes"), std::string::npos) << e.what();
  }
  o.memory_budget_bytes = -1;
  EXPECT_THROW(make_plan(src, dst, DType::kF32, o), Error);
}

}  // namespace
}  // namespace reshard
