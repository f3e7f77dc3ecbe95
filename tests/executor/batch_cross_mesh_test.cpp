// Batches between two meshes of one world (a weight sync: every tensor from the training mesh to the serving mesh) on
// the host backend, every element of every tensor of every rank checked; one memory budget for the whole set
// (budget_groups: consecutive groups whose lowered programs fit it on every rank); and the CLI's cross-mesh batch
// (`reshard run --from-mesh ... --to-mesh ... --tensor ...`).
#include <gtest/gtest.h>

#include <numeric>

#include "batch_lists.hpp"
#include "cli_runner.hpp"
#include "host_runs.hpp"
#include "reshard/harness.hpp"
#include "reshard/plan_batch.hpp"
#include "reshard/planner.hpp"

namespace reshard {
namespace {

using testing::Lcg;

struct CrossCase {
  const char* name;
  const char* from;  // Mesh::str() forms, read by parse_mesh
  const char* to;
  int tensors;
};

void PrintTo(const CrossCase& c, std::ostream* os) { *os << c.from << " -> " << c.to; }

// A list of tensors between the two meshes: uneven and empty shapes, mixed dtypes, R / S0 / S1 / P(sum) sources,
// R / S0 / S1 targets, nccl and auto transports (one-sided members where auto takes them).
std::vector<std::shared_ptr<const Plan>> cross_plans(const Mesh& from, const Mesh& to, int n, unsigned seed,
                                                     std::optional<Index> budget = std::nullopt) {
  Lcg rng(seed);
  std::vector<std::shared_ptr<const Plan>> plans;
  while (static_cast<int>(plans.size()) < n) {
    const Dims shape = testing::kShapes[rng(testing::kShapes.size())];
    const DType dtype = testing::kDtypes[rng(testing::kDtypes.size())];
    std::vector<Placement> a, b;
    for (int d = 0; d < from.ndim(); ++d) a.push_back(testing::random_placement(rng, true));
    for (int d = 0; d < to.ndim(); ++d) b.push_back(testing::random_placement(rng, false));
    PlanOptions o;
    o.transport = rng(2) ? Transport::kNccl : Transport::kAuto;
    o.topology.peer_access = true;
    o.memory_budget_bytes = budget;
    plans.push_back(std::make_shared<const Plan>(make_plan(Layout(from, a, shape), Layout(to, b, shape), dtype, o)));
  }
  return plans;
}

Index expected_elements(const std::vector<std::shared_ptr<const Plan>>& plans) {
  Index n = 0;
  for (const auto& p : plans)
    for (int r = 0; r < p->dst().mesh().world_size(); ++r) n += p->dst().local_volume(r);
  return n;
}

class CrossMeshBatch : public ::testing::TestWithParam<CrossCase> {};

TEST_P(CrossMeshBatch, EveryTensorEveryElement) {
  const CrossCase& c = GetParam();
  const Mesh from = parse_mesh(c.from), to = parse_mesh(c.to);
  const auto plans = cross_plans(from, to, c.tensors, static_cast<unsigned>(c.tensors) * 7 + from.ndim());
  const RunResult r = run_batch(PlanBatch(plans), testing::quick_host_run());
  EXPECT_EQ(r.wrong_elements, 0) << r.first_error;
  EXPECT_EQ(r.checked_elements, 3 * expected_elements(plans));  // two poisoned runs and the final one
}

// Under a budget for the whole set: every group fits on every rank, the groups cover the set in order, and running
// them one after another moves every element.
TEST_P(CrossMeshBatch, BudgetGroupsFitAndCoverTheSet) {
  const CrossCase& c = GetParam();
  const Mesh from = parse_mesh(c.from), to = parse_mesh(c.to);
  constexpr Index kBudget = 4096;
  const auto plans = cross_plans(from, to, c.tensors, static_cast<unsigned>(c.tensors) * 11, kBudget);
  const PlanBatch batch(plans);
  LowerOptions lowering;
  lowering.one_sided = OneSidedCopies::kPush;  // as the executor runs them (ExecutorOptions' default)
  const auto groups = budget_groups(batch, kBudget, lowering);
  std::vector<size_t> order;
  for (const auto& g : groups) order.insert(order.end(), g.begin(), g.end());
  std::vector<size_t> all(batch.size());
  std::iota(all.begin(), all.end(), size_t{0});
  EXPECT_EQ(order, all);
  Index checked = 0;
  for (const auto& g : groups) {
    const PlanBatch part = sub_batch(batch, g);
    for (int r = 0; r < from.world_size(); ++r) {
      const RankProgram p = lower(part, r, lowering);
      EXPECT_LE(p.work_elements * element_size(p.dtype), kBudget) << "group of " << g.size() << ", rank " << r;
    }
    const RunResult run = run_batch(part, testing::quick_host_run());
    EXPECT_EQ(run.wrong_elements, 0) << run.first_error;
    EXPECT_LE(run.workspace_bytes, static_cast<size_t>(kBudget));
    checked += run.checked_elements;
  }
  EXPECT_EQ(checked, 3 * expected_elements(plans));
  EXPECT_EQ(budget_groups(batch, std::nullopt, lowering).size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Meshes, CrossMeshBatch,
                         ::testing::Values(CrossCase{"disjoint", "2[0,1]/4", "2[2,3]/4", 24},
                                           CrossCase{"fewer", "2x2", "2[2,3]/4", 30},
                                           CrossCase{"same_ranks", "2x2", "4", 17},
                                           CrossCase{"overlapping", "2[0,1]/4", "3[1,2,3]/4", 12},
                                           CrossCase{"three_d", "2x1x2[4,5,6,7]/8", "2x2[0,1,2,3]/8", 9}),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

// Partial(sum) sources on NCCL: each receiver stages both contributions of its box (8 KiB).
TEST(CrossMeshBatchBudget, ATensorOverTheBudgetAloneIsRefused) {
  const Layout a(Mesh({2, 2}), {Placement::partial(ReduceOp::kSum), Placement::shard(1)}, Dims{64, 64});
  const Layout b(Mesh({2}, {2, 3}, 4), {Placement::shard(1)}, Dims{64, 64});
  PlanOptions o;
  o.transport = Transport::kNccl;
  const auto plan = std::make_shared<const Plan>(make_plan(a, b, DType::kF32, o));
  ASSERT_EQ(plan->peak_workspace_bytes(), 8192);
  const PlanBatch batch({plan, plan, plan});
  EXPECT_EQ(budget_groups(batch, 8192).size(), 3u);
  // Merged, the small messages are also staged to join one send (coalescing): two tensors need 32 KiB, not 16.
  EXPECT_EQ(budget_groups(batch, 16384).size(), 3u);
  EXPECT_EQ(budget_groups(batch, 32768), (std::vector<std::vector<size_t>>{{0, 1}, {2}}));
  LowerOptions no_coalescing;
  no_coalescing.coalesce_max_bytes = 0;
  EXPECT_EQ(budget_groups(batch, 16384, no_coalescing), (std::vector<std::vector<size_t>>{{0, 1}, {2}}));
  try {
    budget_groups(batch, 4096);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 0 needs 8192 bytes"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("over the memory budget of 4096 for the whole set"), std::string::npos);
  }
}

// Bytes a tensor holds besides the workspace (a caller's staging) count with its group's workspace.
TEST(CrossMeshBatchBudget, HeldBytesCountWithTheWorkspace) {
  const Layout a(Mesh({2, 2}), {Placement::partial(ReduceOp::kSum), Placement::shard(1)}, Dims{64, 64});
  const Layout b(Mesh({2}, {2, 3}, 4), {Placement::shard(1)}, Dims{64, 64});
  PlanOptions o;
  o.transport = Transport::kNccl;
  const auto plan = std::make_shared<const Plan>(make_plan(a, b, DType::kF32, o));
  const PlanBatch batch({plan, plan, plan});
  const std::vector<Index> none{0, 0, 0}, some{16384, 0, 0};
  EXPECT_EQ(budget_groups(batch, 32768, {}, none), (std::vector<std::vector<size_t>>{{0, 1}, {2}}));
  // 16 KiB held by tensor 0: with tensor 1 its group would need 48 KiB.
  EXPECT_EQ(budget_groups(batch, 32768, {}, some), (std::vector<std::vector<size_t>>{{0}, {1, 2}}));
  EXPECT_THROW(budget_groups(batch, 16384, {}, some), Error);  // 8 KiB of workspace and 16 KiB held alone
  EXPECT_THROW(budget_groups(batch, 32768, {}, std::vector<Index>{1, 2}), Error);
  EXPECT_THROW(budget_groups(batch, 32768, {}, std::vector<Index>{-1, 0, 0}), Error);
}

TEST(CrossMeshBatchCli, RunsABatchBetweenMeshes) {
  const testing::CliResult run = testing::run_cli(
      "run --backend host --iters 1 --warmup 0 --from-mesh 2x2 --to-mesh 2 --to-ranks 2,3 --from S0,S1 --to S1 "
      "--shape 8x6 --tensor 7x5:P,S0:R:bf16 --tensor 3x9:S1,R:S0:i32");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("a batch of 3 tensors"), std::string::npos) << run.out;
  // Targets on ranks 2 and 3 only: 48 + 35 * 2 + 27 elements, checked three times.
  EXPECT_NE(run.out.find("verified 435 elements on 4 ranks: all correct"), std::string::npos) << run.out;
  const testing::CliResult budget = testing::run_cli(
      "run --backend host --iters 1 --warmup 0 --from-mesh 2x2 --to-mesh 2 --to-ranks 2,3 --from P,S1 --to S1 "
      "--shape 64x64 --tensor 64x64:P,S1:S1 --tensor 64x64:P,S1:S1 --transport nccl --memory-budget 32KiB");
  EXPECT_EQ(budget.exit_code, 0) << budget.err;
  EXPECT_NE(budget.out.find("2 calls each (groups within the memory budget"), std::string::npos) << budget.out;
  EXPECT_NE(budget.out.find("all correct"), std::string::npos) << budget.out;
  const testing::CliResult bad = testing::run_cli(
      "run --backend host --iters 1 --warmup 0 --from-mesh 2 --to-mesh 2 --to-ranks 2,3 --from S0 --to S1 "
      "--shape 8x6 --tensor 8x6:S0:S2");
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
}

}  // namespace
}  // namespace reshard
