// Bounded resources: requests that do not fit in memory are refused before anything is allocated (tested with an
// injected limit), huge meshes print summaries, and SIGINT/SIGTERM stop long commands promptly with one line.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

namespace reshard {
namespace {

using testing::CliResult;
using testing::run_cli;

TEST(CliMemory, RunThatDoesNotFitIsRefusedNamingNeededAndAvailable) {
  // 2 ranks of a 1024x1024 f32 tensor over NCCL-style messages: sources 4 MiB + targets 4 MiB + workspace 2 x 1 MiB
  // + messages 2 MiB (an nvlink plan reads peers' buffers in place: no workspace, no messages).
  CliResult r = run_cli("run --mesh 2 --from S0 --to S1 --shape 1024x1024 --backend host --transport nccl",
                        "RESHARD_MEMORY_LIMIT_BYTES=1MiB");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(testing::count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("this run needs 12582912 bytes (12.0 MiB) of host memory"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sources 4.0 MiB + targets 4.0 MiB + workspace 2.0 MiB + messages in flight 2.0 MiB"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("but 1048576 bytes (1.0 MiB) is available"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("RESHARD_MEMORY_LIMIT_BYTES"), std::string::npos) << r.err;
  // The same run fits under a limit just above its need.
  CliResult fits = run_cli("run --mesh 2 --from S0 --to S1 --shape 1024x1024 --backend host --iters 1",
                           "RESHARD_MEMORY_LIMIT_BYTES=12582912");
  EXPECT_EQ(fits.exit_code, 0) << fits.err;
  EXPECT_EQ(
      run_cli("run --mesh 2 --from S0 --to S1 --shape 8 --backend host", "RESHARD_MEMORY_LIMIT_BYTES=lots").exit_code,
      2);
}

TEST(CliMemory, SweepIsCheckedBeforeItsFirstMeasurement) {
  std::string csv = testing::temp_base() + "_mem.csv";
  CliResult r =
      run_cli("bench --backend host --meshes 2 --sizes 4KiB,4MiB --dtypes f32 --iters 1 --warmup 0 --csv " + csv,
              "RESHARD_MEMORY_LIMIT_BYTES=1MiB");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("of host memory"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("for mesh 2 1024x1024 f32"), std::string::npos) << r.err;  // the largest case is named
  EXPECT_EQ(testing::read_file(csv),
            "mesh,from,to,shape,dtype,strategy,transport,auto_choice,tensor_bytes,max_rank_bytes,"
            "estimated_us,median_us,graph_us,algbw_GBps,busbw_GBps,bound_us,wrong,checked,"
            "workspace_bytes,steps,backend,iterations,issue_us\n");  // no row was measured
  std::remove(csv.c_str());
}

TEST(CliHugeMeshes, LayoutOfAMillionRanksIsASummary) {
  // 2^20 ranks, the most a mesh may have (docs/security.md).
  CliResult r = run_cli("layout --mesh 1048576 --placements S0 --shape 10");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LT(testing::count_lines(r.out), 80);
  EXPECT_NE(r.out.find("... 1048512 more ranks (--rank R shows one) ..."), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1048575 "), std::string::npos);  // the last rank is listed
  EXPECT_NE(r.out.find("picture drawn for meshes of up to 4096 ranks"), std::string::npos);
  // Beyond the limit: refused at once, naming it.
  CliResult over = run_cli("layout --mesh 100000000 --placements S0 --shape 10");
  EXPECT_EQ(over.exit_code, 2);
  EXPECT_NE(over.err.find("the most reshard supports (2^20)"), std::string::npos) << over.err;
  CliResult one = run_cli("layout --mesh 1048576 --placements S0 --shape 10 --json --rank 7");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  nlohmann::json doc = nlohmann::json::parse(one.out);
  ASSERT_EQ(doc["ranks"].size(), 1u);
  EXPECT_EQ(doc["ranks"][0]["global_offset"][0], 7);
  EXPECT_EQ(doc["ranks"][0]["local_shape"][0], 1);
}

TEST(CliHugeMeshes, PlanOf16kRanksIsASummary) {
  // 16384 ranks: the table lists 32 ranks and the busiest; the picture is drawn in 64 x 64 blocks.
  std::string svg = testing::temp_base() + "_big.svg";
  CliResult r = run_cli("plan --mesh 128x128 --from R,R --to S0,S1 --shape 16384x16384 --svg " + svg);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LT(testing::count_lines(r.out), 80);
  EXPECT_NE(r.out.find("... 16352 more ranks; busiest sender rank"), std::string::npos) << r.out;
  std::string picture = testing::read_file(svg);
  EXPECT_NE(picture.find("destination rank (blocks of 256)"), std::string::npos);
  EXPECT_LT(picture.size(), 2u << 20);
  std::remove(svg.c_str());
}

TEST(CliHugeMeshes, PlanJsonTooLargeSaysHowToNarrowIt) {
  // 520 ranks exchanging row blocks for column blocks: 270400 transfers, over the JSON limit.
  CliResult r = run_cli("plan --mesh 520 --from S0 --to S1 --shape 520x520 --strategy p2p --json");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("this plan lists 270400 transfers"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("give --rank R"), std::string::npos) << r.err;
  CliResult one = run_cli("plan --mesh 520 --from S0 --to S1 --shape 520x520 --strategy p2p --json --rank 3");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(nlohmann::json::parse(one.out)["rank"], 3);
}

CliResult interrupt(const std::string& args, int sig) {
  testing::CliProcess p = testing::spawn_cli(args, "sig");
  // Well into the timed loop, its handlers long installed (sanitizer builds on a loaded machine start slowly).
  std::this_thread::sleep_for(std::chrono::milliseconds(2000));
  ::kill(p.pid, sig);
  return testing::wait_cli(p, std::chrono::seconds(10));
}

TEST(CliSignals, SigintStopsARunPromptlyWithOneLine) {
  auto t0 = std::chrono::steady_clock::now();
  CliResult r = interrupt("run --mesh 2 --from S0 --to S1 --shape 64x64 --backend host --iters 2000000000", SIGINT);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.exit_code, 130) << r.err;
  EXPECT_EQ(r.err,
            "reshard run: interrupted by SIGINT (signal 2); stopped cleanly (buffers, GPUs and communicators "
            "released)\n");
  EXPECT_LT(seconds, 5.0);
}

TEST(CliSignals, SigtermStopsASweepKeepingEveryRowMeasured) {
  std::string csv = testing::temp_base() + "_sig.csv", json = testing::temp_base() + "_sig.json";
  CliResult r = interrupt("bench --backend host --meshes 2 --sizes 4KiB,8KiB,16KiB --iters 100000 --warmup 0 --csv " +
                              csv + " --json " + json,
                          SIGTERM);
  EXPECT_EQ(r.exit_code, 143) << r.err;
  EXPECT_NE(r.err.find("reshard bench: interrupted by SIGTERM (signal 15)"), std::string::npos) << r.err;
  const std::string rows = testing::read_file(csv);
  nlohmann::json doc = nlohmann::json::parse(testing::read_file(json));  // still a valid document
  EXPECT_EQ(static_cast<int>(doc["rows"].size()), testing::count_lines(rows) - 1);
  for (const auto& row : doc["rows"]) EXPECT_EQ(row["wrong"], 0);
  std::remove(csv.c_str());
  std::remove(json.c_str());
}

}  // namespace
}  // namespace reshard
