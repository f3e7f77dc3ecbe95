// `reshard contention` (a redistribution beside GEMMs): malformed GEMM specs and options are refused with one line and
// exit 2 before anything runs, and without GPUs the command says what it needs instead of running; with 2 GPUs a tiny
// case runs eager and from CUDA graphs, verified.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_runner.hpp"
#include "reshard/harness.hpp"

namespace reshard {
namespace {

using testing::CliResult;
using testing::run_cli;

const std::string kCase = "contention --mesh 2 --from S0 --to S1 --shape 64x64 ";

// Runs `args` with no GPU visible (a CUDA build sees none with CUDA_VISIBLE_DEVICES empty).
CliResult run_without_gpus(const std::string& args) { return run_cli(args, "CUDA_VISIBLE_DEVICES="); }

void expect_refused(const std::string& args, const std::string& message) {
  CliResult r = run_without_gpus(args);
  EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
  EXPECT_EQ(testing::count_lines(r.err), 1) << args << "\n" << r.err;
  EXPECT_EQ(r.err.rfind("reshard contention: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(message), std::string::npos) << args << "\nwanted: " << message << "\ngot: " << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

// Malformed GEMM specs and options out of range: each refused with one line naming the problem.
TEST(ContentionCli, MalformedGemmsAndOptionsOutOfRangeAreRefusedNamingTheProblem) {
  const std::pair<const char*, const char*> refused[] = {
      // flags after kCase, and what the error says
      {"--gemm 8192x8192", "--gemm '8192x8192' must be MxNxK[:dtype]"},
      {"--gemm 8192x8192x8192x2", "(three extents, got 4)"},
      {"--gemm 8192xabcx8192", "N 'abc' is not a whole number"},
      {"--gemm 0x8192x8192", "M = 0 is out of range (1..1048576)"},
      {"--gemm 8192x8192x2097152", "K = 2097152 is out of range"},
      {"--gemm 8192x8192x-4", "K = -4 is out of range"},
      {"--gemm 8192x8192x8192:", "the dtype after ':' is empty"},
      {"--gemm 8192x8192x8192:i32", "the GEMM dtype must be bf16, f16 or f32, got i32"},
      {"--gemm 8192x8192x8192:nope", "nope"},
      {"--gemm 99999999999999999999x1x1", "M '99999999999999999999' does not fit in 64 bits"},
      {"--repeats 3", "--repeats must be between 5 and 1000"},
      {"--iters 0", "--iters (GEMMs per loop) must be between 1 and 100000, got 0"},
      {"--warmup -1", "--warmup must be between 0 and 100000, got -1"},
      {"--timeout-ms 0", "--timeout-ms must be >= 1"},
      {"--transports nccl,auto", "--transports: auto is not a transport of its own"},
      {"--transports nccl,nccl", "--transports names nccl twice"},
      {"--transport nccl --transports nvlink", "give --transport or --transports, not both"},
  };
  for (const auto& [flags, message] : refused) expect_refused(kCase + flags, message);
  expect_refused("contention --mesh 2 --from S0 --shape 64x64", "--to is required");
}

TEST(ContentionCli, HelpNamesTheGemmAndTransportsFlags) {
  CliResult r = run_cli("contention --help");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* flag : {"--gemm", "--transports", "--repeats", "--iters", "--json", "--cuda-graph", "--low-sm"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag << "\n" << r.out;
}

TEST(ContentionCli, WithoutGpusSaysWhatItNeeds) {
  expect_refused(kCase + "--gemm 256x256x256:f16", "measuring a redistribution beside GEMMs needs 2 GPUs");
  expect_refused(kCase + "--transports nccl,nvlink --json", "needs 2 GPUs");
  expect_refused(kCase + "--transports nccl,nvlink --cuda-graph --low-sm", "needs 2 GPUs");
  expect_refused(kCase + "--graph", "needs 2 GPUs");
}

// `overlap`, the command's former name, runs the same command (its errors name it contention).
TEST(ContentionCli, FormerNameOverlapRunsIt) {
  expect_refused("overlap --mesh 2 --from S0 --shape 64x64", "--to is required");
  CliResult help = run_cli("overlap --help");
  EXPECT_EQ(help.exit_code, 0) << help.err;
  EXPECT_NE(help.out.find("--gemm"), std::string::npos) << help.out;
}

TEST(ContentionCli, CudaGraphTakesNoValue) {
  CliResult r = run_without_gpus(kCase + "--cuda-graph=maybe");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(testing::count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("--cuda-graph"), std::string::npos) << r.err;
}

// On a machine with 2 GPUs (skipped elsewhere): a tiny redistribution beside tiny GEMMs, eager and from CUDA graphs,
// both transports; every verification pass counted (two first runs, one per repeat, and in graph mode one after the
// capture), none wrong, and the figures are times.
TEST(ContentionCli, TinyCaseOnTwoGpusEagerAndGraph) {
  if (local_gpu_count() < 2) GTEST_SKIP() << "needs 2 GPUs";
  const Index elements = 256 * 256;  // every rank's target, summed over the ranks: the whole tensor once
  const int repeats = 5;
  for (bool graph : {false, true}) {
    CliResult r = run_cli(
        "contention --mesh 2 --from S0 --to S1 --shape 256x256 --strategy p2p --transports nccl,nvlink "
        "--gemm 256x256x256:bf16 --iters 4 --warmup 1 --repeats " +
        std::to_string(repeats) + (graph ? " --cuda-graph" : "") + " --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json rows = nlohmann::json::parse(r.out).at("rows");
    ASSERT_EQ(rows.size(), 2u) << r.out;
    for (const nlohmann::json& row : rows) {
      EXPECT_EQ(row.at("cuda_graph").get<bool>(), graph);
      EXPECT_EQ(row.at("wrong").get<Index>(), 0) << row.dump();
      EXPECT_EQ(row.at("checked").get<Index>(), elements * (2 + repeats + (graph ? 1 : 0))) << row.dump();
      EXPECT_EQ(row.at("gemm_alone_samples_us").size(), static_cast<size_t>(repeats));
      for (const char* key : {"gemm_alone_us", "gemm_beside_us", "redistribution_alone_us", "redistribution_beside_us"})
        EXPECT_GT(row.at(key).get<double>(), 0) << key;
      EXPECT_GE(row.at("redistributions_per_loop").get<int>(), 1);
    }
  }
}

// --low-sm (plan, run, bench, contention): the plan says it was priced for compute beside it, and runs verified.
TEST(LowSmCli, PlanSaysSoAndRunVerifies) {
  CliResult plan = run_cli("plan --mesh 2 --from S0 --to R --shape 64x256 --low-sm");
  EXPECT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_NE(plan.out.find("low-SM priced to run beside compute"), std::string::npos) << plan.out;
  CliResult plain = run_cli("plan --mesh 2 --from S0 --to R --shape 64x256");
  EXPECT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.out.find("low-SM"), std::string::npos) << plain.out;
  CliResult run = run_cli("run --backend host --mesh 2 --from S0 --to S1 --shape 64x256 --iters 1 --warmup 0 --low-sm");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("all correct"), std::string::npos) << run.out;
  CliResult help = run_cli("bench --help");
  EXPECT_NE(help.out.find("--low-sm"), std::string::npos) << help.out;
}

}  // namespace
}  // namespace reshard
