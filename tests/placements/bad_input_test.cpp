// Every class of bad input gets a clear error naming the problem: through the API (reshard::Error with a
// kind and message) and through the CLI (one line on stderr, exit code 2, never a crash).
#include <gtest/gtest.h>

#include "cli_runner.hpp"
#include "expect_error.hpp"
#include "reshard/dtype.hpp"
#include "reshard/layout.hpp"

namespace reshard {
namespace {

using testing::count_lines;
using testing::expect_error;
using testing::run_cli;

TEST(BadInputApi, MeshDims) {
  expect_error([] { Mesh({2, 0}); }, ErrorKind::kInvalidArgument, "mesh dim 1 must be >= 1");
  expect_error([] { Mesh({-2}); }, ErrorKind::kInvalidArgument, "mesh dim 0 must be >= 1");
  expect_error([] { Mesh(std::vector<int>{}); }, ErrorKind::kInvalidArgument, "at least one dim");
  expect_error([] { parse_mesh_shape("2x0"); }, ErrorKind::kParse, "every dim must be >= 1");
  expect_error([] { parse_mesh_shape("2x-1"); }, ErrorKind::kParse, "every dim must be >= 1");
  expect_error([] { parse_mesh_shape("2xa"); }, ErrorKind::kParse, "not a whole number");
  expect_error([] { parse_mesh_shape(""); }, ErrorKind::kParse, "mesh: empty value");
  expect_error([] { parse_mesh_shape("2x"); }, ErrorKind::kParse, "dim 1: empty value");
}

TEST(BadInputApi, MeshOverTheRankLimit) {
  expect_error([] { Mesh({65536, 65536}); }, ErrorKind::kInvalidArgument, "more than 1048576 ranks");
  expect_error([] { Mesh({1024, 1025}); }, ErrorKind::kInvalidArgument, "the most reshard supports (2^20)");
  EXPECT_EQ(Mesh({1024, 1024}).size(), kMaxRanks);
  expect_error([] { parse_mesh_shape("65536x65536"); }, ErrorKind::kParse, "more than 1048576 ranks");
  expect_error([] { parse_mesh_shape("2147483647"); }, ErrorKind::kParse, "more than 1048576 ranks");
  expect_error([] { parse_mesh_shape("99999999999"); }, ErrorKind::kParse, "more than 1048576 ranks");
  expect_error([] { parse_mesh_shape("99999999999999999999"); }, ErrorKind::kParse, "does not fit in 64 bits");
  expect_error([] { parse_mesh_shape("2x2x2x2x2x2x2x2x2"); }, ErrorKind::kParse, "at most 8");
}

TEST(BadInputApi, ExplicitRankList) {
  expect_error([] { Mesh({2, 2}, {0, 1, 2}); }, ErrorKind::kInvalidArgument, "rank list has 3 entries");
  expect_error([] { Mesh({2, 2}, {0, 1, 1, 3}); }, ErrorKind::kInvalidArgument, "appears twice");
  expect_error([] { Mesh({2}, {0, 5}); }, ErrorKind::kInvalidArgument, "outside 0..1");
  expect_error([] { Mesh({2, 2}).coord_of(4); }, ErrorKind::kInvalidArgument, "rank 4 is not in mesh 2x2");
}

TEST(BadInputApi, PlacementCountMustMatchMesh) {
  expect_error(
      [] {
        Layout(Mesh({2, 2}), {Placement::shard(0)}, Dims{4, 4});
      },
      ErrorKind::kInvalidArgument, "1 placements given for a 2-D mesh");
}

TEST(BadInputApi, ShardDimOutOfRange) {
  expect_error(
      [] {
        Layout(Mesh({2}), {Placement::shard(2)}, Dims{4, 4});
      },
      ErrorKind::kInvalidArgument, "shard dim 2 is out of range for a 2-D tensor");
  expect_error(
      [] {
        Layout(Mesh({2}), {Placement::shard(-3)}, Dims{4, 4});
      },
      ErrorKind::kInvalidArgument, "shard dim -3 is out of range");
}

TEST(BadInputApi, UnknownPlacementOrReduceOp) {
  expect_error([] { parse_placement("X"); }, ErrorKind::kParse, "unknown placement 'X'");
  expect_error([] { parse_placement("S"); }, ErrorKind::kParse, "unknown placement 'S'");
  expect_error([] { parse_placement("Sx"); }, ErrorKind::kParse, "shard dim 'x' is not an integer");
  expect_error([] { parse_placement("S(1"); }, ErrorKind::kParse, "is not an integer");
  expect_error([] { parse_placement("P(prod)"); }, ErrorKind::kParse, "unknown reduce op 'prod'");
  expect_error([] { parse_placements("S0,,R"); }, ErrorKind::kParse, "empty entry");
  expect_error([] { parse_placements(""); }, ErrorKind::kParse, "placements: empty value");
  expect_error([] { parse_placements("P(sum"); }, ErrorKind::kParse, "unbalanced parentheses");
  expect_error([] { parse_dtype("f128"); }, ErrorKind::kParse, "unknown dtype 'f128'");
}

TEST(BadInputApi, Shapes) {
  expect_error([] { parse_shape(""); }, ErrorKind::kParse, "shape: empty value");
  expect_error([] { parse_shape("-3x4"); }, ErrorKind::kParse, "extent -3 is negative");
  expect_error([] { parse_shape("4x-3"); }, ErrorKind::kParse, "extent -3 is negative");
  expect_error([] { parse_shape("4xa"); }, ErrorKind::kParse, "'a' is not a whole number");
  expect_error([] { parse_shape("4x"); }, ErrorKind::kParse, "extent 1: empty value");
  expect_error([] { parse_shape("4.5"); }, ErrorKind::kParse, "not a whole number");
  expect_error([] { parse_shape("99999999999999999999"); }, ErrorKind::kParse, "does not fit in 64 bits");
  expect_error(
      [] {
        Layout(Mesh({2}), {Placement::replicate()}, Dims{4, -1});
      },
      ErrorKind::kInvalidArgument, "negative extent");
}

TEST(BadInputApi, ShapeProductOverflow) {
  expect_error([] { parse_shape("4294967296x4294967296"); }, ErrorKind::kParse, "more elements than fit in 64 bits");
  expect_error(
      [] {
        Layout(Mesh({2}), {Placement::replicate()}, Dims{Index(1) << 40, Index(1) << 40});
      },
      ErrorKind::kInvalidArgument, "overflows");
}

struct CliCase {
  const char* name;
  const char* args;
  const char* needle;  // must appear in the one-line error
};

class BadInputCli : public ::testing::TestWithParam<CliCase> {};

TEST_P(BadInputCli, OneLineErrorAndExitCode2) {
  const CliCase& c = GetParam();
  testing::CliResult r = run_cli(c.args);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find(c.needle), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

INSTANTIATE_TEST_SUITE_P(
    Layout, BadInputCli,
    ::testing::Values(
        CliCase{"ZeroMeshDim", "layout --mesh 2x0 --placements S0,R --shape 4x4", "every dim must be >= 1"},
        CliCase{"NegativeMeshDim", "layout --mesh 2x-2 --placements S0,R --shape 4x4", "every dim must be >= 1"},
        CliCase{"MeshOverflow", "layout --mesh 65536x65536 --placements S0,R --shape 4x4", "more than 1048576 ranks"},
        CliCase{"PlacementCount", "layout --mesh 2x2 --placements S0 --shape 4x4", "1 placements given for a 2-D mesh"},
        CliCase{"ShardDimOutOfRange", "layout --mesh 2 --placements S2 --shape 4x4", "shard dim 2 is out of range"},
        CliCase{"UnknownPlacement", "layout --mesh 2 --placements Q --shape 4x4", "unknown placement 'Q'"},
        CliCase{"UnknownReduceOp", "layout --mesh 2 --placements 'P(prod)' --shape 4x4", "unknown reduce op 'prod'"},
        CliCase{"EmptyShape", "layout --mesh 2 --placements S0 --shape ''", "shape: empty value"},
        CliCase{"NegativeShape", "layout --mesh 2 --placements S0 --shape 4x-4", "negative"},
        CliCase{"NonNumericShape", "layout --mesh 2 --placements S0 --shape 4xfoo", "'foo' is not a whole number"},
        CliCase{"ShapeOverflow", "layout --mesh 2 --placements S0 --shape 4294967296x4294967296",
                "more elements than fit in 64 bits"},
        CliCase{"BadRankList", "layout --mesh 2x2 --ranks 0,1,1,3 --placements S0,R --shape 4x4", "appears twice"},
        CliCase{"MissingFlag", "layout --mesh 2 --placements S0", "--shape is required"},
        CliCase{"UnknownFlag", "layout --mesh 2 --placements S0 --shape 4 --bogus", "--bogus"},
        CliCase{"NoSubcommand", "", "subcommand"}),
    [](const ::testing::TestParamInfo<CliCase>& p) { return std::string(p.param.name); });

TEST(Cli, LayoutPrintsPyTorchShapesAsTableJsonAndPicture) {
  testing::CliResult table = run_cli("layout --mesh 2x2 --placements S0,S0 --shape 3x5");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("[0, 5]            [3, 0]"), std::string::npos) << table.out;  // empty shard
  EXPECT_NE(table.out.find("ranks with an empty shard: 3"), std::string::npos) << table.out;
  testing::CliResult json = run_cli("layout --mesh 2x2 --placements S0,S0 --shape 10x5 --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_NE(json.out.find(R"({"rank": 3, "coord": [1, 1], "local_shape": [2, 5], "global_offset": [8, 0]})"),
            std::string::npos)
      << json.out;
}

TEST(Cli, HelpOnEverySubcommand) {
  for (const char* sub : {"layout", "plan"}) {
    testing::CliResult r = run_cli(std::string(sub) + " --help");
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_NE(r.out.find("--mesh"), std::string::npos) << r.out;
  }
}

}  // namespace
}  // namespace reshard
