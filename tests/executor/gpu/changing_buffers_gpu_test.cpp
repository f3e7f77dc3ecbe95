// Runs on buffers that change every call (RunOptions::buffers, `reshard run --buffers`), as a caching allocator's
// caller hands them (skipped without GPUs): the executor exchanges the buffers with the peers on every run
// (BuffersChange::kAnyRank) and maps those it has not mapped. Ranks sharing one GPU (threads, any GPU count): cached
// sets and new sets, one-sided plans separate and fused, copies and reductions, every element of the set each
// verification run used checked. One process per GPU (2 GPUs): `reshard run --buffers new|cached` under a launcher's
// environment, where every new set is a CUDA IPC mapping, and `reshard calibrate`'s mapping figures from such runs.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "cli_runner.hpp"
#include "reshard/harness.hpp"
#include "reshard/planner.hpp"
#include "reshard/rendezvous.hpp"

namespace reshard {
namespace {

// Ranks sharing a GPU need more hardware queues than CUDA's default 8 (shared_gpu_test.cpp says why); before CUDA
// starts.
const bool g_changing_buffers_connections = [] { return ::setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0) == 0; }();

RunResult run_changing(const Plan& plan, BufferUse buffers) {
  RunOptions o;
  o.backend = Backend::kNccl;
  o.buffers = buffers;
  o.warmup = 2;
  o.iters = 12;
  o.timeout = std::chrono::seconds(20);
  return run_shared_gpus(plan, o);
}

TEST(GpuChangingBuffers, SharedGpusCachedAndNewSets) {
  if (local_gpu_count() < 1) GTEST_SKIP() << "needs a GPU";
  struct Case {
    const char *from, *to;
    std::vector<int> mesh;
  };
  const Case cases[] = {{"S0", "S1", {2}}, {"S0", "R", {4}}, {"P", "S1", {2}}, {"S1", "S0", {3}}};
  for (const Case& c : cases)
    for (Fusion f : {Fusion::kNever, Fusion::kAlways})
      for (BufferUse b : {BufferUse::kCached, BufferUse::kNew}) {
        const Layout src(Mesh(c.mesh), parse_placements(c.from), Dims{301, 517});
        PlanOptions po;
        po.strategy = Strategy::kP2P;
        po.transport = Transport::kNvlink;
        po.fusion = f;
        const Plan plan = make_plan(src, src.with_placements(parse_placements(c.to)), DType::kF32, po);
        const RunResult r = run_changing(plan, b);
        EXPECT_EQ(r.wrong_elements, 0) << src.str() << " -> " << c.to << " " << to_string(b) << ": " << r.first_error;
        Index per_pass = 0;  // two poisoned verification runs and the final check, each over every rank
        for (int rank = 0; rank < plan.dst().mesh().world_size(); ++rank) per_pass += plan.dst().local_volume(rank);
        EXPECT_EQ(r.checked_elements, 3 * per_pass) << src.str() << " -> " << c.to;
      }
}

TEST(GpuChangingBuffers, LimitsAreCheckedBeforeAllocating) {
  RunOptions o;
  o.backend = Backend::kNccl;
  o.buffers = BufferUse::kNew;
  o.iters = kMaxBufferSets;
  EXPECT_THROW(buffer_sets(o), Error);
  o.iters = 10;
  o.warmup = 3;
  EXPECT_EQ(buffer_sets(o), 2 + 3 + 10);
  o.cuda_graph = true;
  EXPECT_THROW(buffer_sets(o), Error);
  o.cuda_graph = false;
  o.buffers = BufferUse::kCached;
  EXPECT_EQ(buffer_sets(o), kCachedBufferSets);
  o.buffers = BufferUse::kSame;
  EXPECT_EQ(buffer_sets(o), 1);
}

// Two `reshard run` processes under a launcher's environment; both exit 0 and rank 0 reports every element correct.
void run_two_processes(const std::string& flags) {
  const std::string base = "/tmp/reshard_changing_" + std::to_string(::getpid());
  std::string cmd = "cd /tmp && export RESHARD_RENDEZVOUS_TOKEN=" + make_rendezvous_token() + " WORLD_SIZE=2; ";
  for (int r = 0; r < 2; ++r)
    cmd += "(RANK=" + std::to_string(r) + " LOCAL_RANK=" + std::to_string(r) + " timeout 300 " + testing::cli_path() +
           " run " + flags + " --rendezvous file:" + base + "_id > " + base + "_" + std::to_string(r) +
           " 2>&1; echo $? > " + base + "_rc" + std::to_string(r) + ") & ";
  cmd += "wait";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(testing::read_file(base + "_rc" + std::to_string(r)), "0\n")
        << flags << "\n"
        << testing::read_file(base + "_" + std::to_string(r));
  const std::string log0 = testing::read_file(base + "_0");
  EXPECT_NE(log0.find("all correct"), std::string::npos) << flags << "\n" << log0;
}

TEST(GpuChangingBuffers, OneProcessPerGpuMapsEveryNewSet) {
  if (local_gpu_count() < 2) GTEST_SKIP() << "needs 2 GPUs";
  for (const char* buffers : {"new", "cached"})
    for (const char* pair : {"--from S0 --to S1", "--from P --to S1", "--from S1 --to R"})
      run_two_processes(std::string("--mesh 2 ") + pair + " --shape 1000x517 --strategy p2p --transport nvlink " +
                        "--iters 20 --buffers " + buffers);
}

}  // namespace
}  // namespace reshard
