// One process per GPU on 2 GPUs (skipped with fewer), as sharding runtimes run: two `reshard bench` processes under
// a launcher's environment sweep every pair of R/S0/S1/P(sum) on meshes (2), (1,2) and (2,1), every strategy on both
// transports (collectives on NCCL; nvlink one-sided copies through CUDA IPC), sizes 0, 1, uneven and larger, f32 and
// bf16; every element of every rank checked by the harness (the processes sum their counts). Both must exit 0 and
// rank 0's CSV must hold every run with no wrong element.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "cli_runner.hpp"
#include "reshard/harness.hpp"
#include "reshard/rendezvous.hpp"

namespace reshard {
namespace {

struct Sweep {
  const char* flags;
  int min_rows;  // runs the sweep must hold (every pair has at least one strategy)
};

// Columns of a CSV row (quoted fields hold no commas but the mesh's, which is quoted).
std::vector<std::string> columns(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (char c : line) {
    if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

TEST(GpuProcesses, EveryPairAndStrategyOneProcessPerGpu) {
  if (local_gpu_count() < 2) GTEST_SKIP() << "needs 2 GPUs";
  const std::string base = "/tmp/reshard_psweep_" + std::to_string(::getpid());
  const Sweep sweeps[] = {
      {"--meshes 2 --shapes 0x4,1x1,7x5,300x517 --dtypes f32,bf16", 16 * 4 * 2},
      {"--meshes 1x2,2x1 --shapes 7x5 --dtypes f32", 2 * 16 * 16},
  };
  int sweep = 0;
  for (const Sweep& s : sweeps) {
    const std::string out = base + "_" + std::to_string(sweep++);
    std::string cmd = "cd /tmp && export RESHARD_RENDEZVOUS_TOKEN=" + make_rendezvous_token() + " WORLD_SIZE=2; ";
    for (int r = 0; r < 2; ++r)
      cmd += "(RANK=" + std::to_string(r) + " LOCAL_RANK=" + std::to_string(r) + " timeout 600 " + testing::cli_path() +
             " bench " + s.flags +
             " --placements R,S0,S1,P --strategies collective,p2p,hybrid --transports nccl,nvlink --iters 2 "
             "--warmup 1 --rendezvous file:" +
             out + "_id --csv " + out + ".csv > " + out + "_" + std::to_string(r) + " 2>&1; echo $? > " + out + "_rc" +
             std::to_string(r) + ") & ";
    cmd += "wait";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    for (int r = 0; r < 2; ++r)
      EXPECT_EQ(testing::read_file(out + "_rc" + std::to_string(r)), "0\n")
          << testing::read_file(out + "_" + std::to_string(r));
    const std::string log0 = testing::read_file(out + "_0");
    EXPECT_NE(log0.find(" 0 wrong"), std::string::npos) << log0;
    std::istringstream csv(testing::read_file(out + ".csv"));
    std::string line;
    std::getline(csv, line);
    const std::vector<std::string> header = columns(line);
    auto at = [&](const char* name) {
      for (size_t i = 0; i < header.size(); ++i)
        if (header[i] == name) return i;
      ADD_FAILURE() << "no column " << name << " in " << line;
      return size_t{0};
    };
    const size_t wrong = at("wrong"), checked = at("checked"), transport = at("transport"), bytes = at("tensor_bytes");
    int rows = 0, nvlink = 0;
    while (std::getline(csv, line)) {
      const std::vector<std::string> c = columns(line);
      ASSERT_GT(c.size(), std::max({wrong, checked, transport, bytes})) << line;
      ++rows;
      nvlink += c[transport] == "nvlink";
      EXPECT_EQ(c[wrong], "0") << line;
      if (c[bytes] != "0") {
        EXPECT_NE(c[checked], "0") << line;
      }
    }
    EXPECT_GE(rows, s.min_rows) << s.flags;
    EXPECT_GT(nvlink, 0) << "no run on the nvlink transport: " << s.flags;
    std::printf("%s: %d runs, %d on nvlink, one process per GPU\n", s.flags, rows, nvlink);
    std::remove((out + "_id").c_str());
  }
}

// The sweep above pushes (ExecutorOptions::one_sided_copies' default); pulling through CUDA IPC mappings, on the copy
// engines, stays a choice (`--one-sided-copies pull`): every pair of R/S0/S1 on mesh (2), two processes, verified.
TEST(GpuProcesses, PulledThroughIpcEveryCopyPair) {
  if (local_gpu_count() < 2) GTEST_SKIP() << "needs 2 GPUs";
  const std::string base = "/tmp/reshard_pull_" + std::to_string(::getpid());
  int pairs = 0;
  for (const char* from : {"R", "S0", "S1"}) {
    for (const char* to : {"R", "S0", "S1"}) {
      const std::string out = base + "_" + std::to_string(pairs++);
      std::string cmd = "cd /tmp && export RESHARD_RENDEZVOUS_TOKEN=" + make_rendezvous_token() + " WORLD_SIZE=2; ";
      for (int r = 0; r < 2; ++r)
        cmd += "(RANK=" + std::to_string(r) + " LOCAL_RANK=" + std::to_string(r) + " timeout 120 " +
               testing::cli_path() + " run --mesh 2 --from " + from + " --to " + to +
               " --shape 300x517 --strategy p2p --transport nvlink --fuse never --one-sided-copies pull --iters 3"
               " --rendezvous file:" +
               out + "_id > " + out + "_" + std::to_string(r) + " 2>&1; echo $? > " + out + "_rc" + std::to_string(r) +
               ") & ";
      cmd += "wait";
      ASSERT_EQ(std::system(cmd.c_str()), 0);
      for (int r = 0; r < 2; ++r)
        EXPECT_EQ(testing::read_file(out + "_rc" + std::to_string(r)), "0\n")
            << from << "->" << to << ": " << testing::read_file(out + "_" + std::to_string(r));
      EXPECT_NE(testing::read_file(out + "_0").find("all correct"), std::string::npos)
          << from << "->" << to << ": " << testing::read_file(out + "_0");
      std::remove((out + "_id").c_str());
    }
  }
}

}  // namespace
}  // namespace reshard
