// Plan JSON: exact round trip, and a clear error naming the field for every kind of corruption.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "reshard/plan_format.hpp"
#include "reshard/plan_json.hpp"
#include "reshard/planner.hpp"
#include "reshard/profile.hpp"
#include "reshard/text.hpp"

namespace reshard {
namespace {

using json = nlohmann::ordered_json;

Plan seed_plan(Strategy s = Strategy::kP2P) {
  Layout src(Mesh({2, 2}), parse_placements("S0,S1"), Dims{8192, 8192});
  PlanOptions o;
  o.strategy = s;
  return make_plan(src, src.with_placements(parse_placements("S1,S0")), DType::kBF16, o);
}

TEST(PlanJson, RoundTripIsExact) {
  std::vector<Plan> plans;
  for (Strategy s : {Strategy::kAuto, Strategy::kCollective, Strategy::kP2P, Strategy::kHybrid})
    plans.push_back(seed_plan(s));
  Layout odd(Mesh({2, 3}, {5, 4, 3, 2, 1, 0}), parse_placements("S0,S1"), Dims{7, 11, 3});
  PlanOptions o;
  o.memory_budget_bytes = 1 << 20;
  plans.push_back(make_plan(odd, odd.with_placements(parse_placements("R,S-1")), DType::kI8, o));
  plans.push_back(make_rank_plan(odd, odd.with_placements(parse_placements("S2,S0")), DType::kF64, 3, {}));
  for (const Plan& p : plans) {
    std::string text = plan_to_json(p);
    Plan loaded = plan_from_json(text);
    EXPECT_EQ(plan_to_json(loaded), text);
    EXPECT_EQ(loaded.steps().size(), p.steps().size());
    EXPECT_EQ(loaded.strategy(), p.strategy());
  }
}

TEST(PlanJson, ContainsTheDocumentedFields) {
  json j = json::parse(plan_to_json(seed_plan()));
  for (const char* key : {"global_shape", "dtype", "element_size", "src", "dst", "strategy", "estimated_us",
                          "candidates", "bytes_moved", "peak_workspace_bytes", "steps"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["dtype"], "bf16");
  EXPECT_EQ(j["element_size"], 2);
  EXPECT_EQ(j["steps"][0]["kind"], "p2p");
  ASSERT_EQ(j["candidates"].size(), 2u);  // the requested strategy on both transports
  EXPECT_EQ(j["candidates"][0]["transport"], "nccl");
  EXPECT_EQ(j["candidates"][1]["transport"], "nvlink");
  EXPECT_TRUE(j["steps"][0].contains("transport"));
  const json& t = j["steps"][0]["transfers"][1];
  EXPECT_EQ(t["src"], 1);
  EXPECT_EQ(t["dst"], 2);
  EXPECT_EQ(t["bytes"], 4096LL * 4096 * 2);
}

// Applies `edit` to the JSON document `text` and expects `load` to refuse the result with `needle` in the message.
template <class Load>
void expect_refused_edit(const std::string& text, Load load, const std::function<void(json&)>& edit,
                         const std::string& needle) {
  json j = json::parse(text);
  edit(j);
  try {
    load(j.dump());
    ADD_FAILURE() << "loaded an edited document; expected '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// Applies `edit` to the seed plan's JSON and expects loading to fail with `needle` in the message.
void expect_corrupt(const std::function<void(json&)>& edit, const std::string& needle) {
  expect_refused_edit(
      plan_to_json(seed_plan()), [](const std::string& t) { return plan_from_json(t); }, edit, needle);
}

TEST(PlanJson, CorruptionIsAClearError) {
  EXPECT_THROW(plan_from_json("{ not json"), Error);
  EXPECT_THROW(plan_from_json("[1, 2]"), Error);
  // Found by fuzz_plan_json / fuzz_profile_json: numbers beyond double's range are a parse error, not an escape
  // of nlohmann's out_of_range exception.
  for (const char* text : {"7777e77777", "{\"schema\": 1e999}"}) {
    try {
      plan_from_json(text);
      ADD_FAILURE() << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kParse) << e.what();
      EXPECT_NE(std::string(e.what()).find("plan is not valid JSON"), std::string::npos) << e.what();
    }
    try {
      profile_from_json(text);
      ADD_FAILURE() << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kParse) << e.what();
      EXPECT_NE(std::string(e.what()).find("profile is not valid JSON"), std::string::npos) << e.what();
    }
  }
  expect_corrupt([](json& j) { j.erase("steps"); }, "missing field 'steps'");
  expect_corrupt([](json& j) { j["dtype"] = 5; }, "'dtype' must be a string");
  expect_corrupt([](json& j) { j["dtype"] = "f128"; }, "unknown dtype 'f128'");
  expect_corrupt([](json& j) { j["element_size"] = 4; }, "'element_size' does not match");
  expect_corrupt([](json& j) { j["schema"] = "other/2"; }, "'schema' must be");
  expect_corrupt([](json& j) { j["src"]["placements"] = {"S0", "Q"}; }, "unknown placement 'Q'");
  expect_corrupt([](json& j) { j["src"]["mesh"] = {2, 3}; }, "mesh");
  expect_corrupt([](json& j) { j["global_shape"] = {8192, -1}; }, "negative");
  expect_corrupt([](json& j) { j["ranks_per_node"] = 0; }, "'ranks_per_node' must be >= 1");
  expect_corrupt([](json& j) { j["steps"][0]["kind"] = "teleport"; }, "unknown step kind 'teleport'");
  expect_corrupt([](json& j) { j["steps"][0]["from"] = {"R", "R"}; }, "starts from");
  expect_corrupt([](json& j) { j["steps"][0]["transfers"][1]["dst"] = 7; }, "outside the mesh");
  expect_corrupt([](json& j) { j["steps"][0]["transfers"][1]["global_offset"] = {4096, 0}; }, "is not held by rank 1");
  expect_corrupt([](json& j) { j["steps"][0]["transfers"][1]["bytes"] = 1; }, "bytes 1 !=");
  expect_corrupt([](json& j) { j["steps"][0]["transfers"].erase(1); }, "cover");
  expect_corrupt([](json& j) { j["steps"][0]["transfers"].push_back(j["steps"][0]["transfers"][1]); }, "twice");
  expect_corrupt([](json& j) { j["steps"][0]["transfers"][1]["shape"] = {4096}; }, "differ in length");
  expect_corrupt([](json& j) { j["steps"][0]["transfers"][1]["src"] = "one"; }, "must be an integer");
  expect_corrupt([](json& j) { j["steps"] = json::array(); }, "at least one step");
  expect_corrupt([](json& j) { j["strategy"] = "auto"; }, "strategy is the one chosen");
  expect_corrupt(
      [](json& j) {
        j["steps"][0] = json{{"kind", "all_gather"}, {"mesh_dims", {0}},    {"from", {"S0", "S1"}},
                             {"to", {"R", "S1"}},    {"estimated_us", 1.0}, {"bytes_moved", 0}};
      },
      "last step ends at");
  expect_corrupt(
      [](json& j) {
        j["steps"][0] = json{{"kind", "all_gather"}, {"mesh_dims", {1}},    {"from", {"S0", "S1"}},
                             {"to", {"R", "S1"}},    {"estimated_us", 1.0}, {"bytes_moved", 0}};
      },
      "is not a all_gather");
  expect_corrupt(
      [](json& j) {
        j["steps"][0] = json{{"kind", "all_gather"}, {"mesh_dims", {0, 0}}, {"from", {"S0", "S1"}},
                             {"to", {"R", "R"}},     {"estimated_us", 1.0}, {"bytes_moved", 0}};
      },
      "out of range or repeated");
}

TEST(PlanJson, InvalidCollectiveGeometryIsRejected) {
  // [S0,S0] -> [R,S0] by one all_gather on mesh dim 0 is impossible: rank (0,1) would need rows held by (0,0).
  Layout src(Mesh({2, 2}), parse_placements("S0,S0"), Dims{8, 8});
  PlanSpec spec;
  spec.src = src;
  spec.dst = src.with_placements(parse_placements("R,S0"));
  spec.strategy = Strategy::kCollective;
  spec.steps.push_back(Step{StepKind::kAllGather, {0}, parse_placements("S0,S0"), parse_placements("R,S0"), {}, 0, 0});
  try {
    Plan p(spec);
    ADD_FAILURE() << "accepted an impossible all_gather";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs data from outside its group"), std::string::npos) << e.what();
  }
}

TEST(Profile, DefaultsRoundTripAndEveryFieldIsChecked) {
  Profile p = default_profile();
  std::string text = profile_to_json(p);
  EXPECT_EQ(profile_to_json(profile_from_json(text)), text);
  // The built-in profile is its data file, parsed: written back, the file again (a hand edit keeps that form).
  std::ifstream file(RESHARD_BUILTIN_PROFILE);
  ASSERT_TRUE(file) << RESHARD_BUILTIN_PROFILE;
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(file), {}), text);
  auto expect_bad = [&](const std::function<void(json&)>& edit, const std::string& needle) {
    expect_refused_edit(text, profile_from_json, edit, needle);
  };
  expect_bad([](json& j) { j.erase("copy"); }, "missing field 'copy'");
  expect_bad([](json& j) { j["intra_node"].erase("all_to_all"); }, "missing field 'intra_node.all_to_all'");
  expect_bad([](json& j) { j["intra_node"]["p2p"]["bandwidth_GBps"] = 0; },
             "'intra_node.p2p.bandwidth_GBps' must be > 0");
  expect_bad([](json& j) { j["inter_node"]["all_reduce"]["bandwidth_GBps"] = -3; },
             "must be > 0: a bandwidth in [0.001, 1e+09] GB/s, got -3");
  expect_bad([](json& j) { j["inter_node"]["p2p"]["alpha_us"] = "fast"; }, "must be a number, got \"fast\"");
  expect_bad([](json& j) { j["p2p_per_peer_us"] = -1; }, "'p2p_per_peer_us' must be >= 0");
  expect_bad([](json& j) { j["name"] = 3; }, "'name' must be a string");
  expect_bad([](json& j) { j["nvlink"]["first_map_us"] = -2; }, "'nvlink.first_map_us' must be >= 0");
  EXPECT_THROW(profile_from_json("nope"), Error);
  // first_map_us is read and written; a profile written before it existed takes the built-in figure.
  json mapped = json::parse(text);
  mapped["nvlink"]["first_map_us"] = 1234.5;
  EXPECT_EQ(profile_from_json(mapped.dump()).nvlink.first_map_us, 1234.5);
  mapped["nvlink"].erase("first_map_us");
  EXPECT_EQ(profile_from_json(mapped.dump()).nvlink.first_map_us, p.nvlink.first_map_us);
  EXPECT_GT(p.nvlink.first_map_us, 0);
  json j = json::parse(text);
  j["fits"] = {{"p2p", {{"residual", 0.1}}}};
  Profile with_extra = profile_from_json(j.dump());
  EXPECT_NE(profile_to_json(with_extra).find("\"fits\""), std::string::npos);
}

}  // namespace
}  // namespace reshard

namespace reshard {
namespace {

// A file can relabel a plan's strategy or carry control characters in its labels: the first is refused (the strategy
// names the steps), the second printed escaped.
TEST(PlanJson, ForgedLabelsAreRefusedOrEscaped) {
  expect_corrupt([](json& j) { j["strategy"] = "collective"; }, "a collective plan has no p2p step");
  json j = json::parse(plan_to_json(seed_plan()));
  j["profile"] = "evil\x1b[2J\x07\r";
  const std::string table = plan_table(plan_from_json(j.dump()));
  EXPECT_EQ(table.find('\x1b'), std::string::npos);
  EXPECT_EQ(table.find('\x07'), std::string::npos);
  EXPECT_NE(table.find("evil\\e[2J"), std::string::npos) << table;
}

// A file claiming more steps than any plan has is refused before its steps are built (plan_json.cpp's limit).
TEST(PlanJson, TooManyStepsAreRefusedBeforeBuildingThem) {
  json j = json::parse(plan_to_json(seed_plan()));
  const json step = j["steps"][0];
  j["steps"] = json::array();
  for (std::uint64_t i = 0; i <= kMaxPlanFileSteps; ++i) j["steps"].push_back(step);
  try {
    plan_from_json(j.dump());
    ADD_FAILURE() << "a plan of " << kMaxPlanFileSteps + 1 << " steps loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("more than 65536 steps"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace reshard
