// The CLI against large and careless requests: flags that a plan file fixes, batch benchmarks planned before their
// first row, labels from files escaped, and large meshes answered in seconds or refused naming the limit.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>

#include "cli_runner.hpp"
#include "reshard/profile.hpp"
#include "time_bounds.hpp"

namespace reshard {
namespace {

using testing::CliResult;
using testing::run_cli;
using Clock = std::chrono::steady_clock;

using testing::kSlowdown;
using testing::seconds_since;

// Exit 2 with one line on stderr that contains `needle`.
void expect_refused(const CliResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(testing::count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

std::string write_temp(const std::string& tag, const std::string& text) {
  const std::string path = testing::temp_base() + "_" + tag;
  std::ofstream(path) << text;
  return path;
}

TEST(CliRound2, BuffersChangeCannotBeGivenWithAPlanFile) {
  const CliResult dumped = run_cli("plan --mesh 2 --from S0 --to S1 --shape 8x8 --json");
  ASSERT_EQ(dumped.exit_code, 0) << dumped.err;
  const std::string path = write_temp("plan.json", dumped.out);
  expect_refused(run_cli("run --plan " + path + " --buffers-change"),
                 "--buffers-change shapes a new plan; it cannot be combined with --plan");
  expect_refused(run_cli("plan --load " + path + " --buffers-change"), "--buffers-change shapes a new plan");
  EXPECT_EQ(run_cli("run --plan " + path + " --backend host --iters 1 --warmup 0").exit_code, 0);
  std::remove(path.c_str());
}

TEST(CliRound2, BatchBenchmarksPlanEveryCaseBeforeTheFirstRow) {
  const std::string bench =
      "bench --batch 3 --backend host --meshes 2 --shapes 16x16 --dtypes f32 --iters 1 --warmup 0 ";
  // The default transports: every run of the batch plans and is measured, nvlink's too.
  const CliResult ok = run_cli(bench + "--placements R,S0");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("/nccl"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("/nvlink"), std::string::npos) << ok.out;
  // A dtype of the batch that cannot reduce a Partial: refused before any row, naming the case.
  const CliResult bad = run_cli(bench + "--placements R,P --batch-dtypes f32,bool");
  expect_refused(bad, "batch case 2 [R] -> [P] 16x16 f32, collective/nccl: tensor 1 of the batch: Partial(sum)");
  EXPECT_EQ(bad.out.find("\n2 "), std::string::npos) << bad.out;  // no row was measured
}

TEST(CliRound2, LabelsFromFilesAreEscaped) {
  Profile profile = default_profile();
  profile.name = "\x1b[31mred\x07\r";
  const std::string profile_path = write_temp("profile.json", profile_to_json(profile));
  const CliResult planned = run_cli("plan --mesh 2 --from S0 --to S1 --shape 8x8 --profile " + profile_path);
  EXPECT_EQ(planned.exit_code, 0) << planned.err;
  EXPECT_NE(planned.out.find("profile \\e[31mred\\x07\\r"), std::string::npos) << planned.out;
  const CliResult dumped = run_cli("plan --mesh 2 --from S0 --to S1 --shape 8x8 --json --profile " + profile_path);
  ASSERT_EQ(dumped.exit_code, 0) << dumped.err;
  const std::string plan_path = write_temp("labels.json", dumped.out);
  const CliResult loaded = run_cli("plan --load " + plan_path);
  EXPECT_EQ(loaded.exit_code, 0) << loaded.err;
  EXPECT_NE(loaded.out.find("profile \\e[31mred\\x07\\r"), std::string::npos) << loaded.out;
  for (const CliResult* r : {&planned, &loaded})
    for (char c : {'\x1b', '\x07', '\r'}) EXPECT_EQ(r->out.find(c), std::string::npos) << r->out;
  std::remove(profile_path.c_str());
  std::remove(plan_path.c_str());
}

TEST(CliRound2, LargeMeshesAnswerInSecondsOrNameTheLimit) {
  auto start = Clock::now();
  const CliResult wide = run_cli("plan --mesh 65536 --from S0 --to R --shape 65536");
  EXPECT_EQ(wide.exit_code, 0) << wide.err;
  EXPECT_LT(seconds_since(start), 10 * kSlowdown);
  start = Clock::now();
  expect_refused(run_cli("plan --mesh 4096 --from S0 --to S1 --shape 65536x65536 --strategy p2p"),
                 "lists more than 4194304 transfers; a plan holds at most 4194304");
  EXPECT_LT(seconds_since(start), 10 * kSlowdown);
  // Under auto the p2p candidate past the limit is skipped, and its reason says why; the collective one answers.
  start = Clock::now();
  const CliResult square = run_cli("plan --mesh 65536 --from S0 --to S1 --shape 65536x65536");
  EXPECT_EQ(square.exit_code, 0) << square.err;
  EXPECT_NE(square.out.find("* collective"), std::string::npos) << square.out;
  EXPECT_NE(square.out.find("S0 -all_gather[0]-> R -local[0]-> S1"), std::string::npos) << square.out;
  EXPECT_NE(square.out.find("p2p/nccl        unavailable: the global plan's p2p step S0 -> S1 on mesh 65536 lists more "
                            "than 4194304 transfers; a plan holds at most 4194304"),
            std::string::npos)
      << square.out;
  EXPECT_LT(seconds_since(start), 10 * kSlowdown);
  start = Clock::now();
  const CliResult host = run_cli("run --backend host --mesh 1024 --from S0 --to R --shape 1024 --iters 2 --warmup 0");
  EXPECT_EQ(host.exit_code, 0) << host.err;
  EXPECT_NE(host.out.find("on 1024 ranks: all correct"), std::string::npos) << host.out;
  EXPECT_LT(seconds_since(start), 20 * kSlowdown);
}

}  // namespace
}  // namespace reshard
