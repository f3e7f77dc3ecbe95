// One process per rank on 2 GPUs (skipped with fewer): rank 1 is stopped (SIGSTOP) in the middle of a long timed
// nvlink run. Rank 0 must end by itself with a timeout error within --timeout-ms + 5 s, and once both processes are
// gone, GPU 0's memory must be back to what it was before.
#include <gtest/gtest.h>

#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "cli_runner.hpp"
#include "reshard/harness.hpp"
#include "reshard/rendezvous.hpp"

namespace reshard {
namespace {

size_t free_bytes_on_gpu0() {
  size_t free = 0, total = 0;
  EXPECT_EQ(cudaSetDevice(0), cudaSuccess);
  EXPECT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  return free;
}

TEST(GpuProcesses, AStoppedRankMakesTheOtherFailWithinTheTimeoutAndFreeItsGpu) {
  if (local_gpu_count() < 2) GTEST_SKIP() << "needs 2 GPUs";
  const size_t before = free_bytes_on_gpu0();
  const std::string base = "/tmp/reshard_stop_" + std::to_string(::getpid());
  // The script: both ranks in the background (exec: $p1 is rank 1's process); rank 1 stopped once it prints its
  // timing phase; rank 0's exit code and the milliseconds from the stop to its exit written out; rank 1 killed; a
  // guard kills both after 90 s.
  const std::string script =
      "cd /tmp; export RESHARD_RENDEZVOUS_TOKEN=" + make_rendezvous_token() +
      " WORLD_SIZE=2 RESHARD_TRACE_PHASES=1\n"
      "run() { export RANK=$1 LOCAL_RANK=$1; exec " +
      testing::cli_path() +
      " run --mesh 2 --from S0 --to S1 --shape 4096x4096 --iters 100000000 --timeout-ms 5000 --strategy p2p"
      " --transport nvlink --rendezvous file:" +
      base + "_rv > " + base + "_$1 2>&1; }\n" +
      "run 0 & p0=$!\nrun 1 & p1=$!\n"
      "(sleep 90; kill -KILL $p0 $p1) > /dev/null 2>&1 & guard=$!\n"
      "for i in $(seq 600); do grep -q \"rank 1: timing\" " +
      base +
      "_1 && break; sleep 0.1; done\n"
      "sleep 0.5; kill -STOP $p1; start=$(date +%s%N)\n"
      "wait $p0; echo $? > " +
      base + "_rc0\n" + "echo $(( ($(date +%s%N) - start) / 1000000 )) > " + base + "_ms\n" +
      "kill -KILL $p1; wait $p1; kill $guard; rm -f " + base + "_rv\n";
  {
    std::ofstream f(base + ".sh");
    f << script;
  }
  ASSERT_NE(std::system(("bash " + base + ".sh 2>/dev/null").c_str()), -1);
  const std::string rc0 = testing::read_file(base + "_rc0"), out0 = testing::read_file(base + "_0");
  const double seconds = std::atof(testing::read_file(base + "_ms").c_str()) / 1000.0;
  EXPECT_NE(rc0, "0\n") << out0;    // rank 0 fails ...
  EXPECT_NE(rc0, "137\n") << out0;  // ... by itself, not killed by the guard
  EXPECT_LT(seconds, 5.0 + 5.0) << out0;
  EXPECT_TRUE(out0.find("made no progress") != std::string::npos || out0.find("did not finish") != std::string::npos)
      << out0;
  // Both processes are gone: GPU 0's memory is free again (within what the driver moves around).
  EXPECT_GE(free_bytes_on_gpu0() + (size_t{256} << 20), before);
  std::printf("stopped rank: rank 0 exited %s after %.1f s: %s", rc0.c_str(), seconds,
              out0.substr(out0.rfind("reshard run") == std::string::npos ? 0 : out0.rfind("reshard run")).c_str());
}

}  // namespace
}  // namespace reshard
