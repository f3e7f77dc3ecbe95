// Memory budgets: below what the staged path needs, auto finds the one-sided plan that needs no workspace; a budget no
// plan meets is a clear error. Plans over budget pipelined in chunks, within the budget and right on every backend:
// backends_test.cpp.
#include <gtest/gtest.h>

#include "host_runs.hpp"
#include "reshard/harness.hpp"
#include "reshard/planner.hpp"

namespace reshard {
namespace {

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
