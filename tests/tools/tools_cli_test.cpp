// reshard run / bench / calibrate on a machine without GPUs: the host backend, and clear refusals.
#include <gtest/gtest.h>

#include "cli_runner.hpp"
#include "reshard/harness.hpp"

namespace reshard {
namespace {

using testing::run_cli;

TEST(RunCli, VerifiesOnTheHostBackend) {
  testing::CliResult r =
      run_cli("run --mesh 2x2 --from S0,S1 --to S1,S0 --shape 33x17 --dtype bf16 --backend host --iters 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("all correct"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("busbw = slowest rank's max(bytes in, bytes out) / time"), std::string::npos);
  testing::CliResult j = run_cli("run --mesh 3 --from S1 --to R --shape 10x7 --backend host --iters 2 --json --trace");
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_NE(j.out.find("\"wrong\": 0"), std::string::npos) << j.out;
  // Pulled one-sided copies (ranks as threads of one process push by default), verified the same way.
  testing::CliResult p = run_cli(
      "run --mesh 2x2 --from S0,S1 --to S1,R --shape 64x1024 --backend host --iters 2 --strategy p2p "
      "--transport nvlink --fuse never --one-sided-copies pull");
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_NE(p.out.find("all correct"), std::string::npos) << p.out;
}

// Launcher flags are checked before anything else (issue 46's examples): the message names the problem.
TEST(RunCli, BadLauncherFlagsAreRefusedNamingTheProblem) {
  const std::pair<const char*, const char*> cases[] = {{"--rendezvous udp:x", "must be file:PATH or tcp:HOST:PORT"},
                                                       {"--rendezvous tcp:[]:29999", "empty host"},
                                                       {"--rendezvous tcp:host:0", "is not a port number"},
                                                       {"--ranks-per-node ''", "--ranks-per-node: empty value"}};
  for (const auto& [flags, needle] : cases) {
    testing::CliResult r = run_cli(std::string("run --mesh 2 --from S0 --to R --shape 4x4 ") + flags);
    EXPECT_EQ(r.exit_code, 2) << flags << ": " << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << flags << ": " << r.err;
  }
}

TEST(RunCli, BadRequestsAreRefused) {
  testing::CliResult r = run_cli("run --mesh 2 --from S0 --to S1 --shape 8x8 --backend tpu");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--backend must be auto, nccl or host"), std::string::npos) << r.err;
  r = run_cli("run --mesh 2 --from S0 --to S1 --shape 8x8 --iters 0");
  EXPECT_EQ(r.exit_code, 2);
  r = run_cli("run --mesh 2 --from S0 --to S1 --shape 8x8 --one-sided-copies sideways");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--one-sided-copies must be pull or push, got 'sideways'"), std::string::npos) << r.err;
  r = run_cli("run --mesh 2 --from S0 --to S1 --shape 8x8 --buffers borrowed");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--buffers must be same, cached or new, got 'borrowed'"), std::string::npos) << r.err;
  r = run_cli("run --mesh 2 --from S0 --to S1 --shape 8x8 --backend host --buffers new");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--buffers new needs the nccl backend"), std::string::npos) << r.err;
  if (local_gpu_count() >= 2) {
    r = run_cli("run --mesh 2 --from S0 --to S1 --shape 8x8 --backend nccl --buffers new --iters 5000");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("new buffers on every run need one set per run, at most 4096"), std::string::npos) << r.err;
  }
  if (local_gpu_count() < 64) {
    r = run_cli("run --mesh 64 --from S0 --to S1 --shape 64x64 --backend nccl");
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("--backend nccl needs 64 GPUs"), std::string::npos) << r.err;
  }
}

TEST(BenchCli, HostSweepWritesEveryRun) {
  std::string csv = "/tmp/reshard_bench_test.csv";
  testing::CliResult r =
      run_cli("bench --backend host --meshes 2,1x2 --sizes 4KiB --dtypes f32 --iters 1 --warmup 0 --csv " + csv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string text = testing::read_file(csv);
  EXPECT_EQ(text.rfind("mesh,from,to,shape,dtype,strategy", 0), 0u);
  EXPECT_GT(testing::count_lines(text), 9 + 81);  // every pair of both meshes, at least one strategy each
  EXPECT_NE(r.out.find(" 0 wrong"), std::string::npos) << r.out;
}

TEST(BenchCli, ShapesProgressAndDashesForTheHost) {
  std::string csv = "/tmp/reshard_bench_shapes.csv";
  testing::CliResult r = run_cli(
      "bench --backend host --meshes 2 --shapes 8x8,6x10 --dtypes f32 --placements S0,S1 --iters 2 --warmup 0 --csv " +
      csv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string text = testing::read_file(csv);
  EXPECT_NE(text.find(",8x8,f32,"), std::string::npos) << text;
  EXPECT_NE(text.find(",6x10,f32,"), std::string::npos) << text;
  // 4 placement pairs x 2 shapes, each with its available strategies: progress counts every run.
  const int runs = testing::count_lines(text) - 1;
  EXPECT_NE(r.err.find("reshard bench: " + std::to_string(runs) + " runs (8 cases) on the host backend"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(" on the host backend, estimated "), std::string::npos) << r.err;  // before the first run
  EXPECT_LT(r.err.find(" estimated "), r.err.find("[1/")) << r.err;
  EXPECT_NE(r.err.find("[1/" + std::to_string(runs) + "] "), std::string::npos) << r.err;
  const std::string n = std::to_string(runs);
  std::string last = "[";
  last += n;
  last += "/";
  last += n;
  last += "] 100%";
  EXPECT_NE(r.err.find(last), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ETA"), std::string::npos);
  // Host rows: no CUDA graph and no link bound.
  EXPECT_NE(r.out.find("no link, so no bound"), std::string::npos) << r.out;
  for (size_t at = r.out.find("\n  2 "); at != std::string::npos; at = r.out.find("\n  2 ", at + 1)) {
    std::string row = r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
    EXPECT_NE(row.find(" - "), std::string::npos) << row;
  }
  testing::CliResult both = run_cli("bench --backend host --sizes 4KiB --shapes 8x8");
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.err.find("give --sizes or --shapes, not both"), std::string::npos) << both.err;
  std::remove(csv.c_str());
}

TEST(CalibrateCli, RefusesWithoutGpus) {
  if (local_gpu_count() >= 2) GTEST_SKIP() << "GPUs present";
  testing::CliResult r = run_cli("calibrate --out /tmp/reshard_profile.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("calibrate needs 2 GPUs"), std::string::npos) << r.err;
}

// Under a launcher, calibrate measures the link between two processes, one per node: it says what it needs (two
// processes, --nccl-link inter_node, a rendezvous, a GPU each) before measuring anything.
TEST(CalibrateCli, BetweenProcessesSaysWhatItNeeds) {
  auto refused = [](const std::string& env, const std::string& args, const std::string& needle) {
    testing::CliResult r = run_cli("calibrate --out /tmp/reshard_profile_nodes.json " + args, env);
    EXPECT_EQ(r.exit_code, 2) << env << " " << args;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  };
  refused("WORLD_SIZE=3 RANK=0", "--nccl-link inter_node", "runs as two processes, one per node; WORLD_SIZE is 3");
  refused("WORLD_SIZE=2 RANK=1", "", "measures the link between their nodes: give --nccl-link inter_node");
  refused("WORLD_SIZE=2 RANK=0", "--nccl-link inter_node --rendezvous bogus", "rendezvous 'bogus' must be");
  refused("", "--nccl-link inter_node --rendezvous tcp:127.0.0.1:29999", "WORLD_SIZE is 1");
  if (local_gpu_count() == 0)
    refused("WORLD_SIZE=2 RANK=0", "--nccl-link inter_node --rendezvous tcp:127.0.0.1:29999",
            "multi-process mode needs one GPU per process");
}

TEST(Cli, HelpOnEverySubcommand) {
  for (const char* sub : {"layout", "plan", "run", "bench", "calibrate"}) {
    testing::CliResult r = run_cli(std::string(sub) + " --help");
    EXPECT_EQ(r.exit_code, 0) << sub;
    EXPECT_NE(r.out.find("Options:"), std::string::npos) << sub;
  }
}

}  // namespace
}  // namespace reshard
