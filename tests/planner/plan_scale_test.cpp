// Plans at scale: large global plans answer in seconds or are refused naming the limit (kMaxPlanTransfers), plan files
// past the limits (kMaxPlanRankSteps) are refused before their steps are checked, a plan file's strategy is the one its
// steps make, and a loaded plan's faults are named however deep in the document they lie.
#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string>

#include "expect_error.hpp"
#include "reshard/plan_json.hpp"
#include "reshard/planner.hpp"
#include "time_bounds.hpp"

namespace reshard {
namespace {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;
using testing::expect_error;

using testing::kSlowdown;
using testing::seconds_since;

json plan_json(const Layout& src, const std::string& to, PlanOptions o = {}) {
  return json::parse(plan_to_json(make_plan(src, src.with_placements(parse_placements(to)), DType::kF32, o)));
}

// A collective plan of mesh `ranks` that goes S0 -> R -> S0 -> ... -> R: `pairs` all_gathers with a local step
// between each two.
json chain_plan(int ranks, int pairs) {
  PlanOptions o;
  o.strategy = Strategy::kCollective;
  json j = plan_json(Layout(Mesh({ranks}), parse_placements("S0"), Dims{ranks}), "R", o);
  const json gather = j["steps"][0];
  json local = {{"kind", "local"},      {"mesh_dims", {0}},    {"from", gather["to"]},
                {"to", gather["from"]}, {"estimated_us", 1.0}, {"bytes_moved", 0}};
  json steps = json::array();
  for (int i = 0; i < pairs; ++i) {
    steps.push_back(gather);
    if (i + 1 < pairs) steps.push_back(local);
  }
  j["steps"] = std::move(steps);
  j["candidates"] = json::array();
  return j;
}

// The p2p plan S0 -> S1 of a ranks x ranks tensor: one transfer per pair of ranks.
json all_pairs_plan(int ranks) {
  PlanOptions o;
  o.strategy = Strategy::kP2P;
  return plan_json(Layout(Mesh({ranks}), parse_placements("S0"), Dims{ranks, ranks}), "S1", o);
}

TEST(PlanScale, LargeGlobalPlansAnswerFastOrAreRefusedNamingTheLimit) {
  // A 1-D all_gather over 65,536 ranks: its scratch is computed per group (one pass), not per rank over its group.
  auto start = Clock::now();
  const Layout wide(Mesh({65536}), parse_placements("S0"), Dims{65536});
  EXPECT_EQ(make_plan(wide, wide.with_placements(parse_placements("R")), DType::kF32).strategy(),
            Strategy::kCollective);
  EXPECT_LT(seconds_since(start), 10 * kSlowdown);
  // A global p2p plan past kMaxPlanTransfers is refused before its transfers are listed; one rank's part plans.
  start = Clock::now();
  const Layout big(Mesh({2100}), parse_placements("S0"), Dims{8400, 8400});
  PlanOptions o;
  o.strategy = Strategy::kP2P;
  expect_error([&] { make_plan(big, big.with_placements(parse_placements("S1")), DType::kF32, o); },
               ErrorKind::kInvalidArgument,
               "strategy p2p has no plan for 2100 [S0] 8400x8400 -> [S1]: the global plan's p2p step S0 -> S1 on mesh "
               "2100 lists more than 4194304 transfers; a plan holds at most 4194304");
  EXPECT_LT(seconds_since(start), 10 * kSlowdown);
  // Counted only up to the limit: 2^32 pairs of ranks are refused as fast.
  start = Clock::now();
  const Layout huge(Mesh({65536}), parse_placements("S0"), Dims{65536, 65536});
  expect_error([&] { make_plan(huge, huge.with_placements(parse_placements("S1")), DType::kF32, o); },
               ErrorKind::kInvalidArgument, "on mesh 65536 lists more than 4194304 transfers");
  EXPECT_LT(seconds_since(start), 10 * kSlowdown);
  EXPECT_EQ(
      make_rank_plan(big, big.with_placements(parse_placements("S1")), DType::kF32, 7, o).steps()[0].transfers.size(),
      2 * 2100u - 1);  // what rank 7 sends and receives, its local copy once
}

TEST(PlanScale, AutoFallsBackFromCandidatesPastTheTransferLimit) {
  // p2p would list 2100^2 transfers: under auto the collective candidate is chosen, and p2p's reason names the limit.
  auto start = Clock::now();
  const Layout big(Mesh({2100}), parse_placements("S0"), Dims{8400, 8400});
  const Plan plan = make_plan(big, big.with_placements(parse_placements("S1")), DType::kF32);
  EXPECT_EQ(plan.strategy(), Strategy::kCollective);
  ASSERT_EQ(plan.steps().size(), 1u);
  EXPECT_EQ(plan.steps()[0].kind, StepKind::kAllToAll);
  EXPECT_EQ(plan.bytes_moved(), Index{8400} * 8400 * 4 / 2100 * 2099);  // every rank keeps its own 1/2100th
  int over_limit = 0;
  for (const Candidate& c : plan.candidates()) {
    if (c.strategy != Strategy::kP2P || c.transport != Transport::kNccl) continue;
    EXPECT_FALSE(c.available);
    EXPECT_NE(c.reason.find("lists more than 4194304 transfers; a plan holds at most 4194304"), std::string::npos)
        << c.reason;
    ++over_limit;
  }
  EXPECT_EQ(over_limit, 1);
  EXPECT_LT(seconds_since(start), 10 * kSlowdown);
  // One rank's plan holds only its transfers: p2p stays a candidate there (and wins).
  const Plan mine = make_rank_plan(big, big.with_placements(parse_placements("S1")), DType::kF32, 5);
  EXPECT_EQ(mine.strategy(), Strategy::kP2P);
  EXPECT_EQ(mine.steps()[0].transfers.size(), 2 * 2100u - 1);
}

TEST(PlanScale, AllToAllPastItsPairLimitIsNoEdge) {
  // An all_to_all over 16,384 ranks (2^28 rank x member pairs to size its scratch) is left out: the collective
  // route gathers, then slices locally, answered in well under a second (sizing that all_to_all would take about 15 s).
  auto start = Clock::now();
  const Layout wide(Mesh({16384}), parse_placements("S0"), Dims{65536, 65536});
  PlanOptions o;
  o.strategy = Strategy::kCollective;
  const Plan plan = make_plan(wide, wide.with_placements(parse_placements("S1")), DType::kF32, o);
  ASSERT_EQ(plan.steps().size(), 2u);
  EXPECT_EQ(plan.steps()[0].kind, StepKind::kAllGather);
  EXPECT_EQ(plan.steps()[1].kind, StepKind::kLocal);
  EXPECT_EQ(to_string(plan.steps()[1].to), "S1");
  EXPECT_LT(seconds_since(start), 10 * kSlowdown);
  // Within the limit the all_to_all stays the route (AutoFallsBackFromCandidatesPastTheTransferLimit: 2,100 ranks).
}

TEST(PlanScale, RankStepsPastTheLimitAreRefusedBeforeAnyCheck) {
  // 17 all_gather and local steps on 2^20 ranks: more than 2^24 rank-steps, refused before any step is checked.
  json j = chain_plan(2, 9);
  j["src"]["mesh"] = {1 << 20};
  j["dst"]["mesh"] = {1 << 20};
  j["global_shape"] = {1 << 20};
  auto start = Clock::now();
  expect_error([&] { plan_from_json(j.dump()); }, ErrorKind::kInvalidArgument,
               "a plan of 17 steps on 1048576 ranks is more than 16777216 rank-steps to check");
  EXPECT_LT(seconds_since(start), 2 * kSlowdown);
  // At the limit a plan loads in time linear in its rank-steps: 3 steps on 2^20 ranks.
  j["steps"] = json::array({j["steps"][0], j["steps"][1], j["steps"][2]});
  start = Clock::now();
  EXPECT_EQ(plan_from_json(j.dump()).steps().size(), 3u);
  EXPECT_LT(seconds_since(start), 10 * kSlowdown);
}

TEST(PlanScale, TheFirstBadFieldIsNamedHoweverDeep) {
  json pairs = all_pairs_plan(48);  // 2304 transfers
  ASSERT_EQ(pairs["steps"][0]["transfers"].size(), 2304u);
  json bad_type = pairs;
  bad_type["steps"][0]["transfers"][1000]["src"] = "x";
  expect_error([&] { plan_from_json(bad_type.dump()); }, ErrorKind::kInvalidArgument,
               "plan field 'steps[0].transfers[1000].src' must be an integer");
  // A rank outside the world before a malformed transfer: the earlier one is named.
  json outside = bad_type;
  outside["steps"][0]["transfers"][900]["dst"] = 99;
  expect_error([&] { plan_from_json(outside.dump()); }, ErrorKind::kInvalidArgument,
               "plan field 'steps[0].transfers[900]': ranks 18 -> 99 outside the mesh's world (ranks 0..47)");
  json missing = pairs;
  missing["steps"][0]["transfers"][2303].erase("bytes");
  expect_error([&] { plan_from_json(missing.dump()); }, ErrorKind::kInvalidArgument, "steps[0].transfers[2303].bytes");
  json chain = chain_plan(2, 20000);
  chain["steps"][30001]["kind"] = 5;
  chain["steps"][39000]["from"] = "S0";  // a later fault: the first one is named
  expect_error([&] { plan_from_json(chain.dump()); }, ErrorKind::kInvalidArgument, "steps[30001].kind");
}

// Process CPU seconds since `start` (std::clock): a bound on the work a load does that other processes on the machine
// do not stretch.
double cpu_seconds_since(std::clock_t start) { return static_cast<double>(std::clock() - start) / CLOCKS_PER_SEC; }

TEST(PlanScale, ThePlannersLargestPlanLoadsInTimeLinearInItsSize) {
  // The planner's own 262,144-transfer plan for mesh 512 loads back as it was, within 3 s of CPU (docs/plan-json.md
  // gives the measured times).
  PlanOptions o;
  o.strategy = Strategy::kP2P;
  const Layout src(Mesh({512}), parse_placements("S0"), Dims{512, 512});
  const std::string text = plan_to_json(make_plan(src, src.with_placements(parse_placements("S1")), DType::kF32, o));
  std::clock_t cpu = std::clock();
  const Plan plan = plan_from_json(text);
  EXPECT_LT(cpu_seconds_since(cpu), 3 * kSlowdown);
  ASSERT_EQ(plan.steps()[0].transfers.size(), 262144u);
  EXPECT_EQ(plan.steps()[0].transfers[262143].src, 511);
  EXPECT_EQ(plan.steps()[0].transfers[262143].dst, 511);
  EXPECT_EQ(plan.bytes_moved(), Index{512} * 511 * 4);  // every pair but a rank's own element
}

TEST(PlanScale, StepsUpToTheLimitLoadAndAMillionAreRefusedBeforeAnyIsBuilt) {
  const json chain = chain_plan(2, 32768);
  ASSERT_EQ(chain["steps"].size(), 65535u);
  std::clock_t cpu = std::clock();
  EXPECT_EQ(plan_from_json(chain.dump()).steps().size(), 65535u);
  EXPECT_LT(cpu_seconds_since(cpu), 3 * kSlowdown);
  json two = chain;
  two["steps"] = json::array({chain["steps"][0], chain["steps"][1]});
  std::string million = two.dump();
  const std::string pair = two["steps"][0].dump() + "," + two["steps"][1].dump() + ",";
  const size_t at = million.find("\"steps\":[") + 9;
  std::string repeated;
  repeated.reserve(pair.size() * 500000);
  for (int i = 0; i < 500000; ++i) repeated += pair;  // 1,000,002 steps in all
  million.insert(at, repeated);
  cpu = std::clock();
  expect_error([&] { plan_from_json(million); }, ErrorKind::kInvalidArgument,
               "plan has more than 65536 steps; at most 65536 are loaded");
  EXPECT_LT(cpu_seconds_since(cpu), 3 * kSlowdown);
}

TEST(PlanScale, TransfersLoadAlikeInEveryFormTheDocumentAllows) {
  const json pairs = all_pairs_plan(8);  // 64 transfers
  const std::string expected = plan_to_json(plan_from_json(pairs.dump()));
  auto loads_as_planned = [&](const std::string& text) { EXPECT_EQ(plan_to_json(plan_from_json(text)), expected); };
  // Members in another order, or more members than the planner writes: read member by member, the same transfers.
  json other = pairs;
  json& ts = other["steps"][0]["transfers"];
  ts[5] = json{{"bytes", ts[5]["bytes"]},
               {"shape", ts[5]["shape"]},
               {"global_offset", ts[5]["global_offset"]},
               {"dst", ts[5]["dst"]},
               {"src", ts[5]["src"]}};
  ts[9]["note"] = "extra";
  loads_as_planned(other.dump());
  // A repeated member, a repeated transfers array, a repeated steps array: the last one counts, as in the document.
  std::string text = pairs.dump();
  const size_t first = text.find("{\"src\":0,");
  ASSERT_NE(first, std::string::npos);
  loads_as_planned(std::string(text).insert(first + 1, "\"src\":7,"));
  const size_t transfers = text.find("\"transfers\":");
  loads_as_planned(std::string(text).insert(transfers, "\"transfers\":[{\"src\":1},3],"));
  const size_t steps = text.find("\"steps\":");
  loads_as_planned(std::string(text).insert(steps, "\"steps\":[{\"transfers\":[1]}],"));
  // Forms the planner never writes are refused naming the field, wherever the transfer lies.
  json bad = pairs;
  bad["steps"][0]["transfers"][3]["global_offset"] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
  expect_error([&] { plan_from_json(bad.dump()); }, ErrorKind::kInvalidArgument,
               "plan field 'steps[0].transfers[3].global_offset' has more than 8 entries");
  bad = pairs;
  bad["steps"][0]["transfers"][4]["bytes"] = std::uint64_t{1} << 63;
  expect_error([&] { plan_from_json(bad.dump()); }, ErrorKind::kInvalidArgument,
               "plan field 'steps[0].transfers[4].bytes' value 9223372036854775808 does not fit in 64 bits");
  bad = pairs;
  bad["steps"][0]["transfers"][6]["src"] = 1.0;
  expect_error([&] { plan_from_json(bad.dump()); }, ErrorKind::kInvalidArgument,
               "plan field 'steps[0].transfers[6].src' must be an integer, got 1.0");
  bad = pairs;
  bad["steps"][0]["transfers"][7] = nullptr;
  expect_error([&] { plan_from_json(bad.dump()); }, ErrorKind::kInvalidArgument,
               "plan field 'steps[0].transfers[7]' must be an object");
  bad = pairs;
  bad["steps"][0]["transfers"][8]["dst"] = std::int64_t{1} << 40;
  expect_error([&] { plan_from_json(bad.dump()); }, ErrorKind::kInvalidArgument,
               "plan field 'steps[0].transfers[8]': ranks 1 -> 1099511627776 outside the mesh's world (ranks 0..7)");
  bad = pairs;
  bad["steps"][0]["transfers"][10]["shape"] = {1};
  expect_error([&] { plan_from_json(bad.dump()); }, ErrorKind::kInvalidArgument,
               "plan field 'steps[0].transfers[10]': global_offset and shape differ in length");
  bad = pairs;
  std::swap(bad["steps"][0]["transfers"][11], bad["steps"][0]["transfers"][12]);  // another order: still the planner's
  const Plan swapped = plan_from_json(bad.dump());
  EXPECT_EQ(swapped.steps()[0].transfers[11].dst, 4);
  EXPECT_EQ(swapped.bytes_moved(), 8 * 7 * 4);
  bad["steps"][0]["transfers"][12]["global_offset"] = {1, 4};  // the region another transfer of the step holds
  expect_error([&] { plan_from_json(bad.dump()); }, ErrorKind::kInvalidArgument,
               "step 0 (p2p) transfer 12 (rank 1 -> 3): region [1:2, 4:5] is not in rank 3's target [0:8, 3:4]");
}

TEST(PlanScale, TheStrategyMustBeTheOneTheStepsMake) {
  // A fused nvlink p2p plan relabelled: refused on load, never shown as a strategy it is not.
  const Layout src(Mesh({2}), parse_placements("S0"), Dims{8, 8});
  PlanOptions o;
  o.strategy = Strategy::kP2P;
  o.transport = Transport::kNvlink;
  o.fusion = Fusion::kAlways;
  json fused = plan_json(src, "S1", o);
  ASSERT_EQ(fused["steps"][0].value("fused", false), true);
  EXPECT_EQ(plan_from_json(fused.dump()).strategy(), Strategy::kP2P);
  json collective = fused;
  collective["strategy"] = "collective";
  expect_error([&] { plan_from_json(collective.dump()); }, ErrorKind::kInvalidArgument,
               "step 0 is p2p but the plan's strategy is collective");
  json hybrid = fused;
  hybrid["strategy"] = "hybrid";
  expect_error([&] { plan_from_json(hybrid.dump()); }, ErrorKind::kInvalidArgument,
               "the plan's strategy is hybrid, but its steps make a p2p plan");
  json gathers = chain_plan(2, 1);
  gathers["strategy"] = "hybrid";
  expect_error([&] { plan_from_json(gathers.dump()); }, ErrorKind::kInvalidArgument,
               "the plan's strategy is hybrid, but its steps make a collective plan");
  // The planner's own plans of every strategy load back as they are.
  const Layout mesh2x2(Mesh({2, 2}), parse_placements("S0,S1"), Dims{8, 8});
  for (Strategy s : {Strategy::kCollective, Strategy::kP2P, Strategy::kHybrid}) {
    PlanOptions p;
    p.strategy = s;
    const Plan plan = make_plan(mesh2x2, mesh2x2.with_placements(parse_placements("S1,R")), DType::kF32, p);
    EXPECT_EQ(plan_from_json(plan_to_json(plan)).strategy(), s) << to_string(s);
  }
}

}  // namespace
}  // namespace reshard
