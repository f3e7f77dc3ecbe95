// The rendezvous against hostile peers with real jobs, one process per GPU on 2 GPUs (skipped with fewer): stray
// connections (silent, junk, a process of another job claiming rank 1) while a tcp job gathers, and a file left by
// an earlier job at a file rendezvous's path. Each job must start and verify every element; the other job's process
// must never join. (The same logic without GPUs: tests/executor/rendezvous_test.cpp.)
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "cli_runner.hpp"
#include "reshard/harness.hpp"
#include "reshard/rendezvous.hpp"
#include "sockets.hpp"

namespace reshard {
namespace {

// `reshard run` as rank `rank` of a 2-process nvlink job in the background; its output in OUT, its exit code in
// OUT_rc.
std::thread launch(int rank, const std::string& token, const std::string& spec, const std::string& out) {
  const std::string cmd = "cd /tmp && RESHARD_RENDEZVOUS_TOKEN=" + token + " RANK=" + std::to_string(rank) +
                          " WORLD_SIZE=2 LOCAL_RANK=" + std::to_string(rank) + " timeout 120 " + testing::cli_path() +
                          " run --mesh 2 --from S0 --to S1 --shape 4096x4096 --iters 5 --strategy p2p --transport "
                          "nvlink --timeout-ms 20000 --rendezvous " +
                          spec + " > " + out + " 2>&1; echo $? > " + out + "_rc";
  return std::thread([cmd] { (void)std::system(cmd.c_str()); });
}

void expect_verified(const std::string& out) {
  EXPECT_EQ(testing::read_file(out + "_rc"), "0\n") << testing::read_file(out);
}

TEST(GpuProcesses, StrayConnectionsAndAnotherJobsRankDoNotStopATcpJob) {
  if (local_gpu_count() < 2) GTEST_SKIP() << "needs 2 GPUs";
  const std::string base = "/tmp/reshard_stray_" + std::to_string(::getpid());
  const int port = testing::free_port();
  const std::string spec = "tcp:127.0.0.1:" + std::to_string(port), token = make_rendezvous_token();
  std::thread rank0 = launch(0, token, spec, base + "_0");
  // Once rank 0 listens: a silent connection, one that sends junk, and a process of another job (another token)
  // claiming rank 1, all before the real rank 1.
  int silent = -1;
  for (int i = 0; i < 30 && silent < 0; ++i) silent = testing::raw_connect(port);  // up to ~60 s
  ASSERT_GE(silent, 0) << "rank 0 never listened: " << testing::read_file(base + "_0");
  const int junk = testing::raw_connect(port);
  ASSERT_GE(junk, 0);
  ASSERT_GT(::send(junk, "GET / HTTP/1.0\r\n\r\n", 18, MSG_NOSIGNAL), 0);
  std::thread intruder = launch(1, make_rendezvous_token(), spec, base + "_x");
  std::this_thread::sleep_for(std::chrono::seconds(2));
  std::thread rank1 = launch(1, token, spec, base + "_1");
  rank0.join();
  rank1.join();
  intruder.join();
  ::close(silent);
  ::close(junk);
  expect_verified(base + "_0");
  expect_verified(base + "_1");
  const std::string out0 = testing::read_file(base + "_0"), outx = testing::read_file(base + "_x");
  EXPECT_NE(out0.find("all correct"), std::string::npos) << out0;
  EXPECT_NE(testing::read_file(base + "_x_rc"), "0\n") << outx;  // the other job's process never joined ...
  EXPECT_EQ(outx.find("all correct"), std::string::npos) << outx;
  std::printf("stray connections: the job ran (%s); the other job's rank 1: %s", out0.substr(out0.rfind('#')).c_str(),
              outx.substr(outx.rfind("reshard") == std::string::npos ? 0 : outx.rfind("reshard")).c_str());
}

TEST(GpuProcesses, AStaleRendezvousFileDoesNotStopAFileJob) {
  if (local_gpu_count() < 2) GTEST_SKIP() << "needs 2 GPUs";
  const std::string base = "/tmp/reshard_stale_" + std::to_string(::getpid());
  const std::string path = base + "_id";
  // An earlier job (another token) left its file; rank 1 of the new job starts first.
  RendezvousOptions earlier;
  earlier.token = make_rendezvous_token();
  rendezvous_publish("file:" + path, 2, std::vector<std::byte>(128, std::byte{0x11}), earlier);
  const std::string token = make_rendezvous_token();
  std::thread rank1 = launch(1, token, "file:" + path, base + "_1");
  std::this_thread::sleep_for(std::chrono::seconds(2));
  std::thread rank0 = launch(0, token, "file:" + path, base + "_0");
  rank0.join();
  rank1.join();
  expect_verified(base + "_0");
  expect_verified(base + "_1");
  const std::string out0 = testing::read_file(base + "_0");
  EXPECT_NE(out0.find("all correct"), std::string::npos) << out0;
  std::remove(path.c_str());
}

}  // namespace
}  // namespace reshard
