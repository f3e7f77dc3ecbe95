// The executor on GPUs with one process per rank through the `reshard` CLI (skipped where fewer than 2 GPUs are
// visible): both rendezvous kinds and transports, and a rank process that dies making the others fail in time.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli_runner.hpp"
#include "gpu_fixture.hpp"
#include "reshard/rendezvous.hpp"

namespace reshard {
namespace {

using testing::Gpu;

TEST_F(Gpu, OneProcessPerRank) {
  for (std::string rendezvous : {std::string("file:/tmp/reshard_mp_") + std::to_string(::getpid()),
                                 std::string("tcp:127.0.0.1:") + std::to_string(29500 + ::getpid() % 1000)}) {
    std::string base = "/tmp/reshard_mp_out_" + std::to_string(::getpid());
    std::string cmd, token = make_rendezvous_token();  // the job token a launcher gives every rank
    // The file rendezvous runs the nvlink transport (peers' memory through CUDA IPC), the tcp one nccl.
    const std::string transport = rendezvous.rfind("file:", 0) == 0 ? "nvlink" : "nccl";
    for (int r = 0; r < 2; ++r) {
      cmd += "(RESHARD_RENDEZVOUS_TOKEN=" + token + " RANK=" + std::to_string(r) +
             " WORLD_SIZE=2 LOCAL_RANK=" + std::to_string(r) + " " + testing::cli_path() +
             " run --mesh 2 --from S0 --to S1 --shape 8192x4096 --dtype bf16 --iters 5 --strategy p2p --transport " +
             transport + " --rendezvous " + rendezvous + " > " + base + std::to_string(r) + " 2>&1; echo $? > " + base +
             "rc" + std::to_string(r) + ") & ";
    }
    cmd += "wait";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    for (int r = 0; r < 2; ++r) {
      std::string rc = testing::read_file(base + "rc" + std::to_string(r));
      EXPECT_EQ(rc, "0\n") << testing::read_file(base + std::to_string(r));
    }
    std::string out0 = testing::read_file(base + "0");
    EXPECT_NE(out0.find("all correct"), std::string::npos) << out0;
    EXPECT_NE(out0.find("2 ranks, nccl backend"), std::string::npos) << out0;
    std::printf("%s", out0.c_str());
    if (rendezvous.rfind("file:", 0) == 0) std::remove(rendezvous.substr(5).c_str());
  }
}

TEST_F(Gpu, ARankProcessThatDiesMakesTheOthersFailWithinTheTimeout) {
  for (const char* point : {"after-prepare", "mid-run"}) {
    std::string base = "/tmp/reshard_fault_" + std::to_string(::getpid());
    std::string rendezvous = "file:" + base + "_id_" + point;
    const std::string transport = std::string(point) == "mid-run" ? "nvlink" : "nccl";
    std::string cmd = "cd /tmp && ", token = make_rendezvous_token();
    for (int r = 0; r < 2; ++r) {
      cmd +=
          "(RESHARD_RENDEZVOUS_TOKEN=" + token + " RANK=" + std::to_string(r) +
          " WORLD_SIZE=2 LOCAL_RANK=" + std::to_string(r) + " timeout 90 " + testing::cli_path() +
          " run --mesh 2 --from S0 --to S1 --shape 4096x4096 --iters 5 --timeout-ms 5000 --strategy p2p --transport " +
          transport + " --inject-fault 1:" + point + " --rendezvous " + rendezvous + " > " + base + std::to_string(r) +
          " 2>&1; echo $? > " + base + "rc" + std::to_string(r) + ") & ";
    }
    cmd += "wait";
    auto start = std::chrono::steady_clock::now();
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::string rc0 = testing::read_file(base + "rc0"), rc1 = testing::read_file(base + "rc1");
    std::string out0 = testing::read_file(base + "0");
    EXPECT_EQ(rc1, "3\n") << testing::read_file(base + "1");  // the injected crash
    EXPECT_NE(rc0, "0\n") << out0;                            // the survivor fails ...
    EXPECT_NE(rc0, "124\n") << out0;                          // ... by itself, not killed by `timeout`
    EXPECT_LT(seconds, 60) << out0;
    EXPECT_TRUE(out0.find("timed out") != std::string::npos || out0.find("aborted") != std::string::npos ||
                out0.find("did not") != std::string::npos || out0.find("blocked") != std::string::npos)
        << out0;
    size_t at = out0.rfind("reshard run");
    std::printf("fault %s: survivor exited %s after %.1f s: %s", point, rc0.c_str(), seconds,
                out0.substr(at == std::string::npos ? 0 : at).c_str());
    std::remove(rendezvous.substr(5).c_str());
  }
}
}  // namespace
}  // namespace reshard
