// reshard plan: the seed example, candidate listing, JSON and SVG output, and bad input.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

namespace reshard {
namespace {

using testing::run_cli;

const char* kSeed = "plan --mesh 2x2 --from S0,S1 --to S1,S0 --shape 8192x8192 --dtype bf16";

TEST(PlanCli, SeedExampleP2POnlyRanks1And2Exchange) {
  testing::CliResult r = run_cli(std::string(kSeed) + " --strategy p2p --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["strategy"], "p2p");
  int crossing = 0;
  for (const auto& t : j["steps"][0]["transfers"]) {
    if (t["src"] == t["dst"]) continue;
    ++crossing;
    EXPECT_TRUE((t["src"] == 1 && t["dst"] == 2) || (t["src"] == 2 && t["dst"] == 1)) << t.dump();
  }
  EXPECT_EQ(crossing, 2);
  EXPECT_EQ(j["bytes_moved"], 2LL * 4096 * 4096 * 2);
}

TEST(PlanCli, AutoListsEveryCandidateWithItsPrice) {
  testing::CliResult r = run_cli(kSeed);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* s : {"collective", "p2p", "hybrid"})
    EXPECT_NE(r.out.find(std::string("  ") + s), std::string::npos) << s;
  EXPECT_NE(r.out.find("why: "), std::string::npos);
  EXPECT_NE(r.out.find("est. us"), std::string::npos);
  testing::CliResult j = run_cli(std::string(kSeed) + " --json");
  nlohmann::json plan = nlohmann::json::parse(j.out);
  ASSERT_EQ(plan["candidates"].size(), 5u);  // collective; p2p and hybrid on nccl and on nvlink
  int nvlink = 0;
  for (const auto& c : plan["candidates"]) {
    EXPECT_GT(c["estimated_us"].get<double>(), 0.0) << c.dump();
    nvlink += c["transport"] == "nvlink";
  }
  EXPECT_EQ(nvlink, 2);
  testing::CliResult nccl = run_cli(std::string(kSeed) + " --json --transport nccl");
  EXPECT_EQ(nlohmann::json::parse(nccl.out)["candidates"].size(), 3u);
}

TEST(PlanCli, SvgPicture) {
  std::string path = "/tmp/reshard_plan_test.svg";
  testing::CliResult r = run_cli(std::string(kSeed) + " --svg " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string svg = testing::read_file(path);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("local copy"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

TEST(PlanCli, SvgIsSizedToItsTextWithAColourScale) {
  std::string path = "/tmp/reshard_plan_test_sized.svg";
  // A long title (placements and shape) on one small panel: the canvas must be wider than the title's text.
  testing::CliResult r =
      run_cli("plan --mesh 2x2x2 --from 'S0,S1,P(avg)' --to 'S1,S0,R' --shape 12345x6789x3 --svg " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string svg = testing::read_file(path);
  const size_t w = svg.find("width=\""), title = svg.find("font-size=\"15\">");
  ASSERT_NE(w, std::string::npos);
  ASSERT_NE(title, std::string::npos);
  const double width = std::stod(svg.substr(w + 7));
  const size_t title_end = svg.find("</text>", title);
  const double title_chars = static_cast<double>(title_end - title - 16);
  EXPECT_GT(width, 80 + 0.55 * 15 * title_chars) << svg.substr(0, 400);  // the title is not clipped
  EXPECT_NE(svg.find("bytes sent (log scale)"), std::string::npos);      // the colour scale
  EXPECT_NE(svg.find("viewBox="), std::string::npos);
  std::remove(path.c_str());
}

TEST(PlanCli, SvgOfALargeMeshShowsPeersPerRank) {
  // 16x16 ranks drawn in blocks of 4: a transpose (each rank sends to one other) must not look dense.
  std::string path = "/tmp/reshard_plan_test_blocked.svg";
  testing::CliResult r =
      run_cli("plan --mesh 16x16 --from S0,S1 --to S1,S0 --shape 4096x4096 --strategy p2p --svg " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string svg = testing::read_file(path);
  EXPECT_NE(svg.find("destination rank (blocks of 4)"), std::string::npos);
  EXPECT_NE(svg.find(">peers</text>"), std::string::npos);
  EXPECT_NE(svg.find("each rank sends to at most 1 other rank (16 send to none)"), std::string::npos);
  std::remove(path.c_str());
}

TEST(PlanCli, TableShowsPipelining) {
  // Under a budget the p2p candidate is pipelined: the table says in how many stages of which chunk.
  testing::CliResult r =
      run_cli("plan --mesh 2x2 --from S0,S0 --to S1,S1 --shape 4096x4096 --memory-budget 8MiB --transport nccl");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("pipe   chunks of 1.0 MiB: transfers that need packing run in up to 4 stages"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("4 x 1.0 MiB chunks"), std::string::npos) << r.out;
  testing::CliResult plain = run_cli("plan --mesh 2x2 --from S0,S0 --to S1,S1 --shape 4096x4096");
  EXPECT_EQ(plain.out.find("pipe   "), std::string::npos) << plain.out;
}

TEST(PlanCli, LargeMeshPlans) {
  testing::CliResult r = run_cli("plan --mesh 16x64 --from S0,S1 --to S1,S0 --shape 16384x16384 --ranks-per-node 8");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("busiest sender"), std::string::npos);
}

TEST(PlanCli, RankScopedPlan) {
  testing::CliResult r = run_cli(std::string(kSeed) + " --strategy p2p --rank 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["rank"], 1);
  for (const auto& t : j["steps"][0]["transfers"]) EXPECT_TRUE(t["src"] == 1 || t["dst"] == 1);
}

struct BadPlan {
  const char* name;
  std::string args;
  const char* needle;
};

class PlanCliBadInput : public ::testing::TestWithParam<BadPlan> {};

TEST_P(PlanCliBadInput, OneLineErrorExit2) {
  testing::CliResult r = run_cli(GetParam().args);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(testing::count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find(GetParam().needle), std::string::npos) << r.err;
}

INSTANTIATE_TEST_SUITE_P(
    Plan, PlanCliBadInput,
    ::testing::Values(
        BadPlan{"UnknownStrategy", std::string(kSeed) + " --strategy fastest", "unknown strategy 'fastest'"},
        BadPlan{"NegativeBudget", std::string(kSeed) + " --memory-budget -5", "--memory-budget must be >= 0"},
        BadPlan{"BadBudgetText", std::string(kSeed) + " --memory-budget lots", "is not a byte count"},
        BadPlan{"ImpossibleBudget",
                "plan --mesh 2x2 --from S0,S0 --to S1,S1 --shape 4096x4096 --memory-budget 1 --transport nccl",
                "no plan fits"},
        BadPlan{"MissingProfile", std::string(kSeed) + " --profile /nonexistent.json", "cannot read profile"},
        BadPlan{"BadRanksPerNode", std::string(kSeed) + " --ranks-per-node 0", "--ranks-per-node must be >= 1"},
        BadPlan{"RankOutOfRange", std::string(kSeed) + " --rank 9", "rank 9 is not in mesh 2x2"},
        BadPlan{"PlacementCount", "plan --mesh 2x2 --from S0 --to S1,S0 --shape 8x8", "1 placements given"},
        BadPlan{"HybridOn1D", "plan --mesh 4 --from S0 --to S1 --shape 8x8 --strategy hybrid",
                "strategy hybrid has no plan"}),
    [](const ::testing::TestParamInfo<BadPlan>& p) { return std::string(p.param.name); });

TEST(PlanCli, BadProfileFieldNamesTheField) {
  std::string path = "/tmp/reshard_bad_profile.json";
  {
    std::ofstream out(path);
    out << R"({"name": "x", "intra_node": {}, "inter_node": {}, "p2p_per_peer_us": 1, "copy": {"alpha_us": 1, "bandwidth_GBps": 1}})";
  }
  testing::CliResult r = run_cli(std::string(kSeed) + " --profile " + path);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("missing field 'intra_node.p2p'"), std::string::npos) << r.err;
}

TEST(PlanCli, Help) {
  testing::CliResult r = run_cli("plan --help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag : {"--from", "--to", "--strategy", "--memory-budget", "--profile", "--svg", "--json"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
}

}  // namespace
}  // namespace reshard
