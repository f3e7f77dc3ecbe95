// The executor on the host backend: every strategy over the planner's exhaustive set, every element of every rank
// checked (harness protocol: two poisoned runs and a final run); plans from JSON and per-rank plans, identities run
// in place, the log hook, host reductions and communicator groups. The checks every backend runs (every dtype, Partial
// pairs, memory budgets, zero-copy steps): backends_test.cpp; peer copies: executor_host_peer_copies_test.cpp;
// failures and bad input: executor_host_failures_test.cpp.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "host_runs.hpp"
#include "placement_sets.hpp"
#include "reshard/executor.hpp"
#include "reshard/harness.hpp"
#include "reshard/host_backend.hpp"
#include "reshard/pattern.hpp"
#include "reshard/plan_json.hpp"
#include "reshard/planner.hpp"
#include "test_tier.hpp"

namespace reshard {
namespace {

RunOptions quick() { return testing::quick_host_run(); }

using testing::all_placements;

std::vector<Dims> shapes_for(int nd) {
  switch (nd) {
    case 1:
      return {{0}, {1}, {13}};
    case 2:
      return {{0, 3}, {1, 1}, {7, 10}, {8, 8}};
    default:
      return {{2, 0, 3}, {1, 5, 2}, {5, 3, 7}};
  }
}

using testing::MeshCase;

class HostExecutorExhaustive : public ::testing::TestWithParam<MeshCase> {};

TEST_P(HostExecutorExhaustive, EveryStrategyEveryElement) {
  Mesh mesh(GetParam().mesh);
  int nd = GetParam().tensor_ndim;
  auto placements = all_placements(mesh.ndim(), nd);
  const long long pairs = static_cast<long long>(shapes_for(nd).size() * placements.size() * placements.size());
  const long long stride = testing::tier_stride(pairs, 160, placements.size());  // fast tier: <= 160 pairs
  long long index = 0;
  int runs = 0;
  for (const Dims& shape : shapes_for(nd)) {
    for (const auto& from : placements) {
      for (const auto& to : placements) {
        if (!testing::in_tier(index++, stride)) continue;
        Layout src(mesh, from, shape), dst(mesh, to, shape);
        PlanOptions o;
        // Two ranks per node (nvlink only where transfers stay on a node), or one node (nvlink everywhere).
        o.topology.ranks_per_node = (runs / 2) % 2 ? 2 : 8;
        o.pipeline_chunk_bytes = runs % 2 ? 8 : 16 << 20;  // every other case pipelined in tiny chunks
        Plan automatic = make_plan(src, dst, DType::kI32, o);
        for (const Candidate& c : automatic.candidates()) {
          if (!c.available) continue;
          o.strategy = c.strategy;
          o.transport = c.transport;
          // nvlink steps alternate between one fused kernel per rank and separate peer copies.
          o.fusion = (runs / 4) % 2 ? Fusion::kAlways : Fusion::kNever;
          Plan plan = make_plan(src, dst, DType::kI32, o);
          const std::string where = cat(src.str(), " -> [", to_string(to), "] ", to_string(c.strategy), " ",
                                        to_string(c.transport), o.fusion == Fusion::kAlways ? " fused" : "");
          RunResult r;
          try {
            r = run_plan(plan, quick());
          } catch (const Error& e) {
            FAIL() << where << ": " << e.what();
          }
          ASSERT_EQ(r.wrong_elements, 0) << where;
          Index expected = 0;
          for (int rank = 0; rank < mesh.size(); ++rank) expected += 3 * dst.local_volume(rank);
          ASSERT_EQ(r.checked_elements, expected);  // two poisoned runs and the final one, every element
          ++runs;
        }
      }
    }
  }
  EXPECT_GT(runs, 0);
}

INSTANTIATE_TEST_SUITE_P(Meshes, HostExecutorExhaustive,
                         ::testing::Values(MeshCase{{2}, 1}, MeshCase{{2}, 2}, MeshCase{{2}, 3}, MeshCase{{3}, 2},
                                           MeshCase{{3}, 3}, MeshCase{{2, 2}, 1}, MeshCase{{2, 2}, 2},
                                           MeshCase{{2, 2}, 3}, MeshCase{{2, 3}, 2}, MeshCase{{2, 3}, 3},
                                           MeshCase{{2, 2, 2}, 2}, MeshCase{{2, 2, 2}, 3}, MeshCase{{4, 2}, 2},
                                           MeshCase{{4, 2}, 3}),
                         [](const ::testing::TestParamInfo<MeshCase>& p) { return testing::mesh_case_name(p.param); });

TEST(HostExecutor, PlansLoadedFromJsonAndRankPlansRun) {
  Layout src(Mesh({4, 2}), parse_placements("S0,S1"), Dims{17, 9});
  Layout dst = src.with_placements(parse_placements("S1,S0"));
  for (Strategy s : {Strategy::kCollective, Strategy::kP2P, Strategy::kHybrid}) {
    PlanOptions o;
    o.strategy = s;
    Plan reloaded = plan_from_json(plan_to_json(make_plan(src, dst, DType::kBF16, o)));
    EXPECT_EQ(run_plan(reloaded, quick()).wrong_elements, 0) << to_string(s);
    // Every rank executing its own rank-scoped plan.
    HostWorld world(8);
    std::atomic<Index> wrong{0};
    run_ranks(
        8,
        [&](int r) {
          Plan mine = make_rank_plan(src, dst, DType::kBF16, r, o);
          HostCommunicator comm(world, r);
          HostDevice device;
          Executor exec(mine, comm, device);
          std::vector<std::byte> in(exec.input_bytes()), out(exec.output_bytes());
          fill_pattern(in.data(), src.box(r), src.global_shape(), DType::kBF16);
          exec.run({in.data(), in.size()}, {out.data(), out.size()}, nullptr);
          wrong += count_mismatches(out.data(), dst.box(r), dst.global_shape(), DType::kBF16);
        },
        &world);
    EXPECT_EQ(wrong.load(), 0);
  }
}

// Identical layouts run in place (output == input) without any work, as DTensor returns its input, whichever strategy
// planned them (auto, and p2p on both transports, whose step holds local copies only): every pair of identical
// canonical layouts on a 2x2 mesh, Partial included, every element of every rank checked against the pattern; the
// harness runs them this way too. Overlapping but unequal buffers are refused even for an identity.
TEST(HostExecutor, IdenticalLayoutsRunInPlace) {
  const Mesh mesh({2, 2});
  PlanOptions p2p_nccl, p2p_nvlink;
  p2p_nccl.strategy = p2p_nvlink.strategy = Strategy::kP2P;
  p2p_nccl.transport = Transport::kNccl;
  p2p_nvlink.transport = Transport::kNvlink;
  for (const auto& ps : testing::all_placements(mesh.ndim(), 2))
    for (const PlanOptions& options : {PlanOptions{}, p2p_nccl, p2p_nvlink}) {
      const Layout layout(mesh, ps, Dims{7, 10});
      const Plan plan = make_plan(layout, layout, DType::kI32, options);
      ASSERT_TRUE(is_identity(plan)) << layout.str();
      ASSERT_TRUE(runs_in_place(PlanBatch::of(plan), 0));
      HostWorld world(4);
      std::vector<Index> wrong(4, 0);
      run_ranks(
          4,
          [&](int r) {
            HostCommunicator comm(world, r);
            HostDevice device;
            Executor exec(plan, comm, device);
            std::vector<std::byte> buf(exec.input_bytes());
            fill_local(buf.data(), layout, r, DType::kI32);
            exec.run({buf.data(), buf.size()}, {buf.data(), buf.size()}, nullptr);
            exec.wait(nullptr);
            wrong[r] = count_local_mismatches(buf.data(), layout, layout, r, DType::kI32);
            if (buf.size() < 8) return;
            try {
              exec.run({buf.data(), buf.size() - 4}, {buf.data() + 4, buf.size() - 4}, nullptr);
              wrong[r] += 1;  // accepted
            } catch (const Error& e) {
              EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
            }
          },
          &world);
      for (int r = 0; r < 4; ++r) EXPECT_EQ(wrong[r], 0) << layout.str() << " rank " << r;
      EXPECT_EQ(run_plan(plan, quick()).wrong_elements, 0) << layout.str();
    }
  // A pair that differs only on a size-1 mesh dim is an identity too; one whose placements differ is not.
  const Layout a(Mesh({1, 2}), parse_placements("S0,S1"), Dims{4, 6});
  EXPECT_TRUE(is_identity(make_plan(a, a.with_placements(parse_placements("R,S1")), DType::kF32, {})));
  EXPECT_FALSE(is_identity(make_plan(a, a.with_placements(parse_placements("S0,S0")), DType::kF32, {})));
}

TEST(HostExecutor, LogHookReportsThePlanAndTracedStepTimes) {
  Layout src(Mesh({2}), parse_placements("S0"), Dims{64, 64});
  const Layout dst = src.with_placements(parse_placements("S1"));
  PlanOptions o;
  o.strategy = Strategy::kP2P;
  o.transport = Transport::kNvlink;
  o.fusion = Fusion::kNever;
  Plan plan = make_plan(src, dst, DType::kF32, o);
  HostWorld world(2);
  std::mutex mutex;
  std::vector<std::string> lines;
  std::atomic<Index> wrong{0};
  run_ranks(
      2,
      [&](int r) {
        HostCommunicator comm(world, r);
        HostDevice device;
        ExecutorOptions eo;
        eo.trace = true;
        eo.log = [&](const std::string& line) {
          std::lock_guard<std::mutex> lock(mutex);
          lines.push_back(line);
        };
        Executor exec(plan, comm, device, eo);
        std::vector<std::byte> in(exec.input_bytes()), out(exec.output_bytes());
        fill_pattern(in.data(), src.box(r), src.global_shape(), DType::kF32);
        exec.run({in.data(), in.size()}, {out.data(), out.size()}, nullptr);
        exec.wait(nullptr);
        wrong += count_mismatches(out.data(), dst.box(r), dst.global_shape(), DType::kF32);
      },
      &world);
  EXPECT_EQ(wrong.load(), 0);
  ASSERT_EQ(lines.size(), 4u);  // per rank: the prepared plan, then its one step's times
  int prepared = 0, steps = 0;
  for (const std::string& l : lines) {
    prepared += l.find("prepared p2p/nvlink for 2 [S0] 64x64 -> [S1] f32: 1 steps") != std::string::npos;
    steps += l.find(": step 0 p2p/nvlink: pack ") != std::string::npos;
  }
  EXPECT_EQ(prepared, 2) << lines[0];
  EXPECT_EQ(steps, 2) << lines[1] << " / " << lines[3];
}

TEST(HostReduce, HalfPrecisionAccumulatesInFloat) {
  std::vector<std::uint16_t> a{0x3c00, 0xc000}, b{0x3c00, 0x4200};  // f16: 1 + 1, -2 + 3
  host_reduce(a.data(), b.data(), 2, DType::kF16, ReduceOp::kSum);
  EXPECT_EQ(a[0], 0x4000);                                          // 2.0
  EXPECT_EQ(a[1], 0x3c00);                                          // 1.0
  std::vector<std::uint16_t> c{0x3f80, 0x4000}, d{0x4040, 0x3f80};  // bf16: max(1, 3), max(2, 1)
  host_reduce(c.data(), d.data(), 2, DType::kBF16, ReduceOp::kMax);
  EXPECT_EQ(c[0], 0x4040);
  EXPECT_EQ(c[1], 0x4000);
}

}  // namespace
}  // namespace reshard

namespace reshard {
namespace {

// Groups are cached per mesh and dims: mesh dim 0 of (4) and of (2,2) are different groups (found on 4 GPUs, where
// one runner served both meshes and reused the 4-rank group for (2,2)).
TEST(HostCommunicatorGroups, CachedPerMeshNotPerDims) {
  HostWorld world(4);
  run_ranks(
      4,
      [&](int r) {
        HostCommunicator comm(world, r);
        EXPECT_EQ(comm.group(Mesh({4}), {0}).size(), 4);
        Communicator& g = comm.group(Mesh({2, 2}), {0});
        EXPECT_EQ(g.size(), 2);
        EXPECT_EQ(g.rank(), r / 2);
        EXPECT_EQ(&comm.group(Mesh({2, 2}), {0}), &g);
        EXPECT_EQ(comm.group(Mesh({2, 2}), {1}).size(), 2);
      },
      &world);
}

}  // namespace
}  // namespace reshard
