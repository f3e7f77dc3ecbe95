// Plans from files: `reshard run --plan FILE` and `reshard plan --load FILE` validate a plan (possibly edited) against
// the layouts, render it and run it with every element checked; corrupt plans are refused naming the field.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

namespace reshard {
namespace {

using nlohmann::json;
using testing::CliResult;
using testing::run_cli;

using testing::kCliRequest;

class PlanFile : public ::testing::Test {
 protected:
  std::string path(const std::string& name) { return testing::temp_base() + "_" + name + ".json"; }
  json make(const std::string& strategy) {
    CliResult r = run_cli("plan " + kCliRequest + " --strategy " + strategy + " --json");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json::parse(r.out);
  }
  std::string write(const std::string& name, const std::string& text) {
    std::string p = path(name);
    std::ofstream(p) << text;
    files_.push_back(p);
    return p;
  }
  std::string write(const std::string& name, const json& j) { return write(name, j.dump(2)); }
  void TearDown() override {
    for (const std::string& f : files_) std::remove(f.c_str());
  }
  std::vector<std::string> files_;
};

TEST_F(PlanFile, DumpedPlanLoadsRendersAndRunsVerified) {
  CliResult dumped = run_cli("plan " + kCliRequest + " --strategy p2p --json");
  ASSERT_EQ(dumped.exit_code, 0) << dumped.err;
  std::string file = write("plain", dumped.out);
  CliResult again = run_cli("plan --load " + file + " --json");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out, dumped.out);  // the text round-trips
  CliResult table = run_cli("plan --load " + file);
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("chose  p2p"), std::string::npos) << table.out;
  CliResult run = run_cli("run --plan " + file + " --backend host --iters 2");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("verified 9216 elements on 4 ranks: all correct"), std::string::npos) << run.out;
  // Layout flags given with the file must agree with it.
  EXPECT_EQ(run_cli("run --plan " + file + " " + kCliRequest + " --backend host --iters 1").exit_code, 0);
  CliResult other = run_cli("run --plan " + file + " --mesh 4 --backend host");
  EXPECT_EQ(other.exit_code, 2);
  EXPECT_NE(other.err.find("is a plan for --mesh 2x2, not 4"), std::string::npos) << other.err;
  other = run_cli("run --plan " + file + " --to S0,S1 --backend host");
  EXPECT_EQ(other.exit_code, 2);
  EXPECT_NE(other.err.find("--to"), std::string::npos) << other.err;
  other = run_cli("plan --load " + file + " --strategy collective");
  EXPECT_EQ(other.exit_code, 2);
  EXPECT_NE(other.err.find("--strategy shapes a new plan; it cannot be combined with --load"), std::string::npos);
}

// An output names the file the command reads: it is read first, then replaced (priced anew here); a command that
// fails before writing leaves it as it was.
TEST_F(PlanFile, OutputMayNameTheFileItReads) {
  CliResult dumped = run_cli("plan " + kCliRequest + " --strategy p2p --json");
  ASSERT_EQ(dumped.exit_code, 0) << dumped.err;
  std::string file = write("in_place", dumped.out);
  CliResult again = run_cli("plan --load " + file + " --json " + file);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  std::ifstream in(file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, dumped.out);
  CliResult run = run_cli("run --plan " + file + " --backend host --iters 1 --json " + file);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::ifstream record(file);
  EXPECT_EQ(json::parse(record).at("wrong").get<long long>(), 0);
  const std::string kept = write("kept", dumped.out);
  CliResult refused = run_cli("plan --load " + kept + " --mesh 4 --json " + kept);
  EXPECT_EQ(refused.exit_code, 2);
  std::ifstream still(kept);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(still)), std::istreambuf_iterator<char>()), dumped.out);
}

TEST_F(PlanFile, EditedButValidPlanRunsWithEveryElementCorrect) {
  // Edits that keep the plan's meaning: transfers listed in another order, candidates dropped, the summary figures
  // zeroed (they are recomputed on load). The plan loads, prints its recomputed figures and runs correctly.
  const std::string request = "--mesh 2x2 --from S0,S1 --to S1,S0 --shape 64x48";
  CliResult made = run_cli("plan " + request + " --strategy p2p --transport nccl --json");
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const json original = json::parse(made.out);
  json j = original;
  std::reverse(j["steps"][0]["transfers"].begin(), j["steps"][0]["transfers"].end());
  j.erase("candidates");
  j["estimated_us"] = 0.0;
  j["bytes_moved"] = 0;
  j["steps"][0]["bytes_moved"] = 0;
  std::string file = write("edited", j);
  CliResult loaded = run_cli("plan --load " + file + " --json");
  ASSERT_EQ(loaded.exit_code, 0) << loaded.err;
  const json back = json::parse(loaded.out);
  EXPECT_EQ(back["bytes_moved"], original["bytes_moved"]);
  EXPECT_EQ(back["steps"][0]["bytes_moved"], original["steps"][0]["bytes_moved"]);
  EXPECT_EQ(back["steps"][0]["transfers"].size(), original["steps"][0]["transfers"].size());
  CliResult run = run_cli("run --plan " + file + " --backend host --iters 2 --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  json result = json::parse(run.out);
  EXPECT_EQ(result["wrong"], 0);
  EXPECT_EQ(result["checked"], 3 * 64 * 48);  // every element of every rank, three times
}

TEST_F(PlanFile, EditedPlanWithAnotherSenderIsRefused) {
  // [R,S1] -> [S1,S0] on 2x2: ranks 0 and 2 both hold columns 0:24; the planner has rank 0 send rank 1 its block. An
  // edit that has rank 2 send it instead is refused: each rank of a job plans (or loads) its own part, and a plan
  // whose senders differ from the planner's would leave ranks waiting for messages that never come
  // (docs/security.md: loaded plans carry the planner's transfers only).
  const std::string request = "--mesh 2x2 --from R,S1 --to S1,S0 --shape 64x48";
  CliResult made = run_cli("plan " + request + " --strategy p2p --transport nccl --json");
  ASSERT_EQ(made.exit_code, 0) << made.err;
  json j = json::parse(made.out);
  bool edited = false;
  for (json& t : j["steps"][0]["transfers"])
    if (t["src"] == 0 && t["dst"] == 1) {
      t["src"] = 2;
      edited = true;
    }
  ASSERT_TRUE(edited) << made.out;
  std::string file = write("holder", j);
  for (const std::string& cmd : {"plan --load " + file + " " + request, "run --plan " + file + " --backend host"}) {
    CliResult r = run_cli(cmd);
    EXPECT_EQ(r.exit_code, 2) << cmd;
    EXPECT_NE(r.err.find("(rank 2 -> 1 of [32:64, 0:24]) is not one the planner assigns"), std::string::npos) << r.err;
    EXPECT_EQ(testing::count_lines(r.err), 1) << r.err;
  }
}

TEST_F(PlanFile, RankScopedPlanNeedsOneProcessPerRank) {
  CliResult r = run_cli("plan " + kCliRequest + " --strategy p2p --rank 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string file = write("rank1", r.out);
  CliResult run = run_cli("run --plan " + file + " --backend host");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("is rank 1's plan; one process runs every rank and needs the global plan"), std::string::npos)
      << run.err;
  CliResult load = run_cli("plan --load " + file);
  ASSERT_EQ(load.exit_code, 0) << load.err;
  EXPECT_NE(load.out.find("scope  transfers of rank 1 only"), std::string::npos);
}

struct Corruption {
  const char* name;
  std::function<void(json&)> edit;  // on a p2p plan (or a collective one, `collective`)
  bool collective;
  const char* needle;
};

class CorruptPlan : public PlanFile, public ::testing::WithParamInterface<Corruption> {};

TEST_P(CorruptPlan, IsRefusedWithExit2NamingTheField) {
  json j = make(GetParam().collective ? "collective" : "p2p");
  GetParam().edit(j);
  std::string file = write(GetParam().name, j);
  for (const std::string& cmd : {"run --plan " + file + " --backend host", "plan --load " + file}) {
    CliResult r = run_cli(cmd);
    EXPECT_EQ(r.exit_code, 2) << cmd << ": " << r.err;
    EXPECT_EQ(testing::count_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(GetParam().needle), std::string::npos) << cmd << ": " << r.err;
    EXPECT_EQ(r.out.find("verified"), std::string::npos);  // nothing ran
  }
}

INSTANTIATE_TEST_SUITE_P(
    Plans, CorruptPlan,
    ::testing::Values(
        Corruption{"MissingSteps", [](json& j) { j.erase("steps"); }, false, "steps"},
        Corruption{"WrongSchema", [](json& j) { j["schema"] = "reshard.plan/0"; }, false, "schema"},
        Corruption{"UnknownDtype", [](json& j) { j["dtype"] = "f128"; }, false, "f128"},
        Corruption{"TransferBytes", [](json& j) { j["steps"][0]["transfers"][1]["bytes"] = 7; }, false, "transfer 1"},
        Corruption{"RankOutsideMesh", [](json& j) { j["steps"][0]["transfers"][1]["dst"] = 9; }, false, "transfers[1]"},
        Corruption{"RegionNotHeld", [](json& j) { j["steps"][0]["transfers"][1]["global_offset"][0] = 40; }, false,
                   "transfer 1"},
        Corruption{"TargetNotTiled", [](json& j) { j["steps"][0]["transfers"].erase(1); }, false, "cover"},
        Corruption{"BrokenChain",
                   [](json& j) {
                     j["steps"][1]["from"] = {"S0", "R"};
                   },
                   true, "step 1"},
        Corruption{"CollectiveCannotProduce", [](json& j) { j["steps"][0]["mesh_dims"] = {0}; }, true, "step 0"}),
    [](const ::testing::TestParamInfo<Corruption>& p) { return std::string(p.param.name); });

TEST_F(PlanFile, TextThatIsNotAPlanIsRefused) {
  std::string file = write("garbage", std::string("{\"schema\": "));
  CliResult r = run_cli("run --plan " + file + " --backend host");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not valid JSON"), std::string::npos) << r.err;
  r = run_cli("run --plan /nonexistent-plan.json --backend host");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("cannot read plan file '/nonexistent-plan.json'"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace reshard
