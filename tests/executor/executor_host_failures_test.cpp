// The executor on the host backend when something goes wrong: a rank that never sends or fails, bad buffers refused
// before any communication, a communicator or rank plan that does not fit the mesh.
#include <gtest/gtest.h>

#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "host_runs.hpp"
#include "reshard/executor.hpp"
#include "reshard/host_backend.hpp"
#include "reshard/planner.hpp"

namespace reshard {
namespace {

TEST(HostExecutor, ARankThatNeverSendsTimesOutInsteadOfHanging) {
  Layout src(Mesh({2}), parse_placements("S0"), Dims{64, 64});
  PlanOptions o;
  o.strategy = Strategy::kP2P;
  Plan plan = make_plan(src, src.with_placements(parse_placements("S1")), DType::kF32, o);
  HostWorld world(2, HostWorldOptions{std::chrono::milliseconds(300)});
  auto start = std::chrono::steady_clock::now();
  try {
    run_ranks(2, [&](int r) {
      HostCommunicator comm(world, r);
      HostDevice device;
      Executor exec(plan, comm, device);
      if (r == 1) return;  // never posts its send
      std::vector<std::byte> in(exec.input_bytes()), out(exec.output_bytes());
      exec.run({in.data(), in.size()}, {out.data(), out.size()}, nullptr);
    });
    FAIL() << "rank 0 should have timed out";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kTimeout) << e.what();
    EXPECT_NE(std::string(e.what()).find("waiting for data from rank 1"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

// A device whose peer link says its copy engines cannot reach the peers (as CUDA says of ranks in the same process):
TEST(HostExecutor, AFailingRankStopsTheOthers) {
  Layout src(Mesh({4}), parse_placements("S0"), Dims{64, 8});
  Plan plan = make_plan(src, src.with_placements(parse_placements("S1")), DType::kF32, {});
  HostWorld world(4, HostWorldOptions{std::chrono::seconds(60)});
  auto start = std::chrono::steady_clock::now();
  try {
    run_ranks(
        4,
        [&](int r) {
          if (r == 2) throw Error(ErrorKind::kBackend, "rank 2 crashed");
          HostCommunicator comm(world, r);
          HostDevice device;
          Executor exec(plan, comm, device);
          std::vector<std::byte> in(exec.input_bytes()), out(exec.output_bytes());
          exec.run({in.data(), in.size()}, {out.data(), out.size()}, nullptr);
        },
        &world);
    FAIL() << "expected the failure of rank 2";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 2 crashed"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));  // not the 60 s timeout
}

TEST(HostExecutor, BadBuffersAreRejectedBeforeAnyCommunication) {
  Layout src(Mesh({2}), parse_placements("S0"), Dims{8, 8});
  PlanOptions two_sided;  // one-sided plans agree on their steps with every rank first (collective): one rank here
  two_sided.transport = Transport::kNccl;
  Plan plan = make_plan(src, src.with_placements(parse_placements("S1")), DType::kF32, two_sided);
  HostWorld world(2, HostWorldOptions{std::chrono::milliseconds(200)});
  HostCommunicator comm(world, 0);
  HostDevice device;
  Executor exec(plan, comm, device);
  std::vector<std::byte> in(exec.input_bytes()), out(exec.output_bytes());
  auto expect = [&](ConstBuffer i, MutableBuffer o, const std::string& needle) {
    try {
      exec.run(i, o, nullptr);
      ADD_FAILURE() << "accepted a bad buffer";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect({in.data(), in.size() - 1}, {out.data(), out.size()}, "input buffer has 127 bytes");
  expect({in.data(), in.size()}, {out.data(), 4}, "output buffer has 4 bytes");
  expect({nullptr, in.size()}, {out.data(), out.size()}, "input buffer is null");
  // S0 -> S1 is not an identity: it cannot run in place, nor into an output that overlaps the input.
  std::vector<std::byte> both(2 * in.size());
  expect({both.data(), in.size()}, {both.data(), out.size()}, "output buffer overlaps the input buffer on rank 0");
  expect({both.data(), in.size()}, {both.data() + 8, out.size()}, "only a plan between identical layouts");
  // Nothing was sent: rank 1's receive from rank 0 finds no message.
  HostCommunicator peer(world, 1);
  std::vector<std::byte> sink(8);
  RecvOp recv{0, sink.data(), sink.size()};
  EXPECT_THROW(peer.exchange({}, std::span<const RecvOp>(&recv, 1), nullptr), Error);
}
TEST(HostExecutor, CommunicatorMustSpanTheMesh) {
  Layout src(Mesh({4}), parse_placements("S0"), Dims{8});
  Plan plan = make_plan(src, src.with_placements(parse_placements("R")), DType::kF32, {});
  HostWorld world(2);
  HostCommunicator comm(world, 0);
  HostDevice device;
  EXPECT_THROW(Executor(plan, comm, device), Error);
  Plan scoped = make_rank_plan(src, src.with_placements(parse_placements("R")), DType::kF32, 3, {});
  HostWorld four(4);
  HostCommunicator rank1(four, 1);
  try {
    Executor exec(scoped, rank1, device);
    FAIL() << "ran rank 3's plan on rank 1";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds only rank 3's transfers"), std::string::npos) << e.what();
  }
}
}  // namespace
}  // namespace reshard
