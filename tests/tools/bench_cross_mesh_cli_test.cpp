// reshard bench between two meshes (--from-mesh/--to-mesh, as `run` takes them) on the host backend: every placement
// pair over each mesh's dims, each row verified, the cases written for bench/pytorch_cross_mesh.py, and bad mesh pairs
// refused with exit 2 naming the problem.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>

#include "cli_runner.hpp"

namespace reshard {
namespace {

using testing::CliResult;
using testing::run_cli;

// Runs a sweep between meshes with --json and --cases files; returns its rows and cases.
std::pair<nlohmann::json, nlohmann::json> sweep(const std::string& meshes, const std::string& placements) {
  const std::string base = testing::temp_base(), json = base + "_cross.json", cases = base + "_cross_cases.json";
  CliResult r = run_cli("bench --backend host " + meshes + " --placements " + placements +
                        " --shapes 7x6 --dtypes f32 --iters 1 --warmup 0 --json " + json + " --cases " + cases);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(" 0 wrong"), std::string::npos) << r.out;
  auto rows = nlohmann::json::parse(testing::read_file(json))["rows"];
  auto written = nlohmann::json::parse(testing::read_file(cases));
  std::remove(json.c_str());
  std::remove(cases.c_str());
  return {rows, written};
}

// Every row is between the meshes, verified (every element of every rank checked, none wrong), p2p; every placement
// pair has a row.
void expect_rows(const nlohmann::json& rows, const std::string& mesh, size_t pairs) {
  std::set<std::pair<std::string, std::string>> seen;
  for (const auto& row : rows) {
    EXPECT_EQ(row["mesh"], mesh) << row;
    EXPECT_EQ(row["wrong"], 0) << row;
    EXPECT_GT(row["checked"].get<long long>(), 0) << row;
    EXPECT_EQ(row["strategy"].get<std::string>().rfind("p2p", 0), 0u) << row;  // only p2p plans cross meshes
    seen.emplace(row["from"], row["to"]);
  }
  EXPECT_EQ(seen.size(), pairs);
}

TEST(BenchCrossMeshCli, SweepsEveryPairOntoOneRankOfTwo) {
  const auto [rows, cases] = sweep("--from-mesh 2 --to-mesh 1 --to-ranks 1", "R,S0,S1");
  expect_rows(rows, "2->1[1]/2", 9);
  ASSERT_EQ(cases.size(), 9u) << cases;  // one case per pair, in bench/pytorch_cross_mesh.py's format
  EXPECT_EQ(cases[0]["from_mesh"], nlohmann::json::array({2}));
  EXPECT_EQ(cases[0]["from_ranks"], nlohmann::json::array({0, 1}));
  EXPECT_EQ(cases[0]["to_mesh"], nlohmann::json::array({1}));
  EXPECT_EQ(cases[0]["to_ranks"], nlohmann::json::array({1}));
  EXPECT_EQ(cases[0]["shape"], nlohmann::json::array({7, 6}));
}

TEST(BenchCrossMeshCli, SweepsBetweenMeshesOfDifferentDims) {
  // (2,2) -> (4): source placements over two mesh dims, target over one.
  expect_rows(sweep("--from-mesh 2x2 --to-mesh 4", "S0,S1").first, "2x2->4", 4 * 2);
  // Disjoint rank sets of one world (pipeline stages); the target mesh's shape defaults to the source's.
  expect_rows(sweep("--from-mesh 2 --to-ranks 2,3", "R,S1").first, "2[0,1]/4->2[2,3]/4", 2 * 2);
}

TEST(BenchCrossMeshCli, CsvRowsKeepTheMeshOneField) {
  const std::string csv = testing::temp_base() + "_cross.csv";
  CliResult r = run_cli(
      "bench --backend host --from-mesh 2 --to-mesh 2 --to-ranks 1,2 --placements S0 --shapes 4x4 "
      "--dtypes f32 --strategies p2p --transports nccl --iters 1 --warmup 0 --csv " +
      csv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string text = testing::read_file(csv);
  EXPECT_NE(text.find("\n\"2[0,1]/3->2[1,2]/3\",\"S0\",\"S0\",4x4,f32,p2p,nccl,"), std::string::npos) << text;
  std::remove(csv.c_str());
}

TEST(BenchCrossMeshCli, BadMeshPairsAreRefused) {
  const std::string common = "bench --backend host --shapes 4x4 --dtypes f32 --iters 1 --warmup 0 ";
  const std::pair<std::string, std::string> cases[] = {
      {"--from-mesh 2 --to-mesh 1 --to-ranks 2 --world-size 2", "--to-ranks"},
      {"--from-mesh 2 --to-mesh 2 --to-ranks 1,1", "--to-ranks: rank 1 appears twice"},
      {"--meshes 2 --from-mesh 2 --to-mesh 1", "--meshes and --from-mesh/--to-mesh both name the meshes"},
      {"--to-mesh 1", "--from-mesh is required"},
      {"--from-mesh 2 --to-mesh 1 --batch 2", "--batch runs on one mesh"},
      {"--from-mesh 2x --to-mesh 1", "mesh '2x'"},
  };
  for (const auto& [flags, message] : cases) {
    CliResult r = run_cli(common + flags);
    EXPECT_EQ(r.exit_code, 2) << flags << "\n" << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << flags << "\n" << r.err;
    EXPECT_EQ(r.out, "") << flags;  // refused before anything runs
  }
}

}  // namespace
}  // namespace reshard
