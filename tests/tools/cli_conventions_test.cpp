// CLI habits shared by every command: unknown names reported first with the nearest valid one, `--json [FILE]`,
// outputs that cannot be written (exit 1 naming the file), values refused with one line (exit 2), control characters
// escaped, and the launcher's environment checked.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_runner.hpp"
#include "reshard/harness.hpp"

namespace reshard {
namespace {

using testing::CliResult;
using testing::run_cli;

using testing::kCliRequest;

void expect_one_line(const CliResult& r, int code, const std::string& needle) {
  EXPECT_EQ(r.exit_code, code) << r.err;
  EXPECT_EQ(testing::count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.err;
}

TEST(CliNames, MistypedOptionIsReportedFirstWithTheNearestName) {
  // --form instead of --from: the unknown flag is the error, not the missing --from it causes.
  CliResult r = run_cli("plan --mesh 2 --form S0 --to S1 --shape 8x8");
  expect_one_line(r, 2, "unknown option '--form' (did you mean '--from'?)");
  EXPECT_EQ(r.err.rfind("reshard plan: error: ", 0), 0u) << r.err;
  expect_one_line(run_cli("run " + kCliRequest + " --iter 3"), 2, "did you mean '--iters'?");
  expect_one_line(run_cli("bench --mesh 2"), 2, "did you mean '--meshes'?");
  expect_one_line(run_cli("layout --mesh 2 --shape 4 --placement S0"), 2, "did you mean '--placements'?");
  expect_one_line(run_cli("plan " + kCliRequest + " --xyzzy"), 2, "unknown option '--xyzzy'");
}

TEST(CliNames, MistypedCommandExits2WithTheNearestName) {
  CliResult r = run_cli("plna " + kCliRequest);
  expect_one_line(r, 2, "unknown command 'plna' (did you mean 'plan'?)");
  EXPECT_NE(r.err.find("layout, plan, run, bench, calibrate"), std::string::npos) << r.err;
  expect_one_line(run_cli("benchmark"), 2, "did you mean 'bench'?");
  expect_one_line(run_cli("frobnicate"), 2, "unknown command 'frobnicate'; the commands are");
}

TEST(CliJson, NoValueOrDashIsStandardOutputAndAFileGetsTheSameText) {
  for (const std::string& cmd : {std::string("layout --mesh 2x2 --placements S0,S0 --shape 3x5"), "plan " + kCliRequest,
                                 "run " + kCliRequest + " --backend host --iters 2"}) {
    CliResult bare = run_cli(cmd + " --json");
    ASSERT_EQ(bare.exit_code, 0) << cmd << ": " << bare.err;
    nlohmann::json j = nlohmann::json::parse(bare.out);  // nothing but JSON on stdout
    EXPECT_TRUE(j.is_object()) << cmd;
    CliResult dash = run_cli(cmd + " --json -");
    ASSERT_EQ(dash.exit_code, 0) << cmd << ": " << dash.err;
    EXPECT_TRUE(nlohmann::json::accept(dash.out)) << cmd;
    std::string path = testing::temp_base() + "_json.json";
    CliResult file = run_cli(cmd + " --json " + path);
    ASSERT_EQ(file.exit_code, 0) << cmd << ": " << file.err;
    nlohmann::json from_file = nlohmann::json::parse(testing::read_file(path));
    EXPECT_TRUE(from_file.is_object()) << cmd;
    // With the JSON in a file, the table still goes to standard output, as without --json.
    CliResult plain = run_cli(cmd);
    ASSERT_EQ(plain.exit_code, 0) << cmd << ": " << plain.err;
    EXPECT_NE(file.out.find(cmd.substr(0, cmd.find(' '))), std::string::npos) << cmd << ": " << file.out;
    if (cmd.rfind("run", 0) != 0) {
      EXPECT_EQ(file.out, plain.out) << cmd;
      EXPECT_EQ(from_file, j) << cmd;  // run's timings differ between runs
    }
    std::remove(path.c_str());
  }
  // bench: rows as they are measured, and a valid document at the end.
  CliResult b = run_cli("bench --backend host --meshes 2 --sizes 4KiB --dtypes f32 --iters 1 --warmup 0 --json");
  ASSERT_EQ(b.exit_code, 0) << b.err;
  nlohmann::json j = nlohmann::json::parse(b.out);
  EXPECT_TRUE(j["link"].is_null());  // the host backend has no link
  ASSERT_FALSE(j["rows"].empty());
  for (const auto& row : j["rows"]) {
    EXPECT_EQ(row["wrong"], 0);
    EXPECT_TRUE(row["bound_us"].is_null());  // no bound on the host backend
    EXPECT_TRUE(row["graph_us"].is_null());
  }
}

TEST(CliOutputs, EveryWriteFailureExits1NamingTheFile) {
  const std::string sweep = "bench --backend host --meshes 2 --sizes 4KiB --dtypes f32 --iters 1 --warmup 0";
  expect_one_line(run_cli(sweep + " --csv /nonexistent-dir/x.csv"), 1, "--csv: cannot write '/nonexistent-dir/x.csv'");
  expect_one_line(run_cli(sweep + " --json /nonexistent-dir/x.json"), 1,
                  "--json: cannot write '/nonexistent-dir/x.json'");
  expect_one_line(run_cli(sweep + " --cases /nonexistent-dir/c.json"), 1, "--cases: cannot write");
  expect_one_line(run_cli("plan " + kCliRequest + " --svg /dev/full"), 1, "cannot write '/dev/full'");
  expect_one_line(run_cli("plan " + kCliRequest + " --json", "", "/dev/full"), 1, "cannot write standard output");
  expect_one_line(run_cli("plan " + kCliRequest, "", "/dev/full"), 1, "cannot write standard output");
  expect_one_line(run_cli("layout --mesh 2 --placements S0 --shape 4", "", "/dev/full"), 1,
                  "cannot write standard output");
  expect_one_line(run_cli("run " + kCliRequest + " --backend host --iters 1", "", "/dev/full"), 1,
                  "cannot write standard output");
  expect_one_line(run_cli("calibrate --out /nonexistent-dir/p.json"), 1, "--out: cannot write");
}

TEST(CliValues, OutOfRangeValuesAreRefused) {
  const std::string run = "run " + kCliRequest + " --backend host --iters 1";
  for (const char* v : {"-5", "nan", "1e-300", "inf", "0"})
    expect_one_line(run_cli(run + " --link-GBps " + v), 2, "--link-GBps must be a bandwidth between");
  CliResult ok = run_cli(run + " --link-GBps 100");
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("bound = that max / 100.0 GB/s link"), std::string::npos) << ok.out;
  expect_one_line(run_cli("plan " + kCliRequest + " --rank -2"), 2, "rank -2 is not in mesh 2x2");
  expect_one_line(run_cli("plan " + kCliRequest + " --fuse sometimes"), 2, "unknown fusion 'sometimes'");
  expect_one_line(run_cli("bench --backend host --transports nccl,nccl"), 2, "--transports names nccl twice");
  expect_one_line(run_cli("bench --backend host --transports nccl,auto"), 2, "auto is not a transport of its own");
  expect_one_line(run_cli("plan " + kCliRequest + " --rank 4"), 2, "rank 4 is not in mesh 2x2");
  expect_one_line(run_cli("layout --mesh 2 --placements S0 --shape 4 --rank 2"), 2, "rank 2 is not in mesh 2");
  expect_one_line(run_cli(run + " --inject-fault 1:mid-run"), 2, "--inject-fault needs the nccl backend");
  expect_one_line(run_cli(run + " --inject-fault 4294967297:mid-run"), 2, "rank 4294967297 is not in mesh 2x2");
  expect_one_line(run_cli(run + " --inject-fault -1:mid-run"), 2, "rank -1 is not in mesh 2x2");
  expect_one_line(run_cli(run + " --inject-fault one:mid-run"), 2, "must be RANK:after-prepare or RANK:mid-run");
  expect_one_line(run_cli("plan " + kCliRequest + " --memory-budget ''"), 2, "--memory-budget: empty value");
  expect_one_line(run_cli("plan " + kCliRequest + " --memory-budget 99999999999999999999"), 2,
                  "does not fit in 64 bits");
  expect_one_line(run_cli("plan " + kCliRequest + " --memory-budget 9999999999GiB"), 2, "does not fit in 64 bits");
}

// run and bench (one process per rank under a launcher) read the launcher's environment alike.
TEST(CliValues, LauncherEnvironmentIsChecked) {
  for (const std::string& command :
       {"run " + kCliRequest + " --iters 1", std::string("bench --meshes 4 --sizes 1KiB")}) {
    const std::string name = command.substr(0, command.find(' '));
    expect_one_line(run_cli(command, "WORLD_SIZE=-3"), 2, "WORLD_SIZE=-3 is out of range");
    expect_one_line(run_cli(command, "WORLD_SIZE="), 2, "WORLD_SIZE is set but empty");
    expect_one_line(run_cli(command, "WORLD_SIZE=two"), 2, "WORLD_SIZE='two' is not a whole number");
    expect_one_line(run_cli(command, "WORLD_SIZE=4 RANK=4"), 2, "RANK=4 is out of range (0..3)");
    expect_one_line(run_cli(command, "WORLD_SIZE=4 RANK=0 MASTER_ADDR=h MASTER_PORT=99999"), 2, "MASTER_PORT=99999");
    if (local_gpu_count() == 0) {
      // A launcher's shell without GPUs: said once, checked before any CUDA call.
      CliResult r = run_cli(command, "WORLD_SIZE=4 RANK=0");
      EXPECT_EQ(r.exit_code, 2) << r.err;
      EXPECT_NE(r.err.find("reshard " + name + ": multi-process mode (WORLD_SIZE=4 from the environment)"),
                std::string::npos)
          << r.err;
      EXPECT_NE(r.err.find("needs one GPU per process: LOCAL_RANK 0 but 0 GPUs are visible"), std::string::npos)
          << r.err;
      EXPECT_EQ(r.err.find("cuda"), std::string::npos) << r.err;
      EXPECT_EQ(testing::count_lines(r.err), 2) << r.err;  // the note, then the error
      // Rank 1 prints no note.
      CliResult r1 = run_cli(command, "WORLD_SIZE=4 RANK=1");
      EXPECT_EQ(testing::count_lines(r1.err), 1) << r1.err;
    }
    expect_one_line(run_cli(command + " --backend host", "WORLD_SIZE=4 RANK=0"), 2,
                    "--backend host runs every rank in one process");
  }
}

TEST(CliText, ControlCharactersInEchoedInputAreEscaped) {
  // (system() runs /bin/sh: printf makes the control characters)
  CliResult r = run_cli("plan --mesh \"$(printf '2\\033[31mx2')\" --from S0 --to S1 --shape 8");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("2\\e[31m"), std::string::npos) << r.err;
  r = run_cli("plan " + kCliRequest + " --dtype \"$(printf 'f\\n32')\"");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(testing::count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("f\\n32"), std::string::npos) << r.err;
  r = run_cli("plan " + kCliRequest + " \"--$(printf '\\007')bell\"");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.find('\x07'), std::string::npos) << r.err;
}

}  // namespace
}  // namespace reshard
