// Hostile inputs at the library level (issue 24): plans from files that pass loose checks but would read outside a
// buffer, summary figures that are not trusted, input files that are not regular files or too large, JSON nested too
// deep, profiles whose numbers would overflow estimates, unbounded planning, echoed control characters.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "reshard/plan_json.hpp"
#include "reshard/planner.hpp"
#include "reshard/profile.hpp"
#include "reshard/text.hpp"

namespace reshard {
namespace {

using json = nlohmann::ordered_json;

// The message of the reshard::Error `f` throws ("" and a test failure when it throws none).
std::string error_of(const std::function<void()>& f, ErrorKind kind = ErrorKind::kInvalidArgument) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

#define EXPECT_MENTIONS(message, needle) EXPECT_NE((message).find(needle), std::string::npos) << (message)

Layout transpose_src() { return Layout(Mesh({2, 2}), parse_placements("S0,S1"), Dims{64, 48}); }

json rank_plan_json(int rank) {
  PlanOptions o;
  o.strategy = Strategy::kP2P;
  Layout src = transpose_src();
  return json::parse(
      plan_to_json(make_rank_plan(src, src.with_placements(parse_placements("S1,S0")), DType::kF32, rank, o)));
}

// The issue's probe: `plan --mesh 2x2 --from S0,S1 --to S1,S0 --shape 64x48 --strategy p2p --rank 1 --json` with one
// transfer rank 1 sends rewritten so that offset + shape wraps around int64 and `bytes` matches the wrapped volume.
TEST(HostilePlan, TheOverflowingScopedPlanIsRefusedNamingTheTransfer) {
  json j = rank_plan_json(1);
  json& transfers = j["steps"][0]["transfers"];
  size_t k = 0;
  while (!(transfers[k]["src"] == 1 && transfers[k]["dst"] != 1)) ++k;  // an outgoing transfer
  const Index big = Index(1) << 59;
  transfers[k]["global_offset"] = {big - 32, 24};
  transfers[k]["shape"] = {32 + 15 * big, 24};
  transfers[k]["bytes"] = 3072;
  const int dst = transfers[k]["dst"];
  const std::string message = error_of([&] { plan_from_json(j.dump()); });
  EXPECT_MENTIONS(message, "step 0 (p2p) transfer " + std::to_string(k) + " (rank 1 -> " + std::to_string(dst) + ")");
  EXPECT_MENTIONS(message, "is not held by rank 1");
  // The same edit in a global plan, and an incoming transfer of a scoped plan, are refused alike.
  PlanOptions o;
  o.strategy = Strategy::kP2P;
  Layout src = transpose_src();
  json g = json::parse(plan_to_json(make_plan(src, src.with_placements(parse_placements("S1,S0")), DType::kF32, o)));
  g["steps"][0]["transfers"][1]["global_offset"] = {big - 32, 24};
  g["steps"][0]["transfers"][1]["shape"] = {32 + 15 * big, 24};
  EXPECT_MENTIONS(error_of([&] { plan_from_json(g.dump()); }), "step 0 (p2p) transfer 1");
}

TEST(HostilePlan, EveryTransferOfAScopedPlanIsItsOverlapAndThePlannersOwn) {
  // An outgoing transfer shrunk to a part of its overlap: it tiles nothing of rank 1, so only the overlap rule sees it.
  json j = rank_plan_json(1);
  json& transfers = j["steps"][0]["transfers"];
  size_t k = 0;
  while (!(transfers[k]["src"] == 1 && transfers[k]["dst"] != 1)) ++k;
  transfers[k]["shape"][1] = transfers[k]["shape"][1].get<Index>() - 1;
  transfers[k]["bytes"] = transfers[k]["bytes"].get<Index>() - transfers[k]["shape"][0].get<Index>() * 4;
  EXPECT_MENTIONS(error_of([&] { plan_from_json(j.dump()); }), "is not all of rank 1's overlap with rank");
  // Dropping an outgoing transfer leaves a valid-looking plan for rank 1; its peer would wait forever for the data.
  j = rank_plan_json(1);
  json& t2 = j["steps"][0]["transfers"];
  k = 0;
  while (!(t2[k]["src"] == 1 && t2[k]["dst"] != 1)) ++k;
  t2.erase(k);
  EXPECT_MENTIONS(error_of([&] { plan_from_json(j.dump()); }), "lacks the transfer rank 1 ->");
  // A global plan where another replica sends a block tiles correctly, but is not the planner's choice.
  Layout rep(Mesh({2}), parse_placements("R"), Dims{8});
  PlanOptions o;
  o.strategy = Strategy::kP2P;
  json g = json::parse(plan_to_json(make_plan(rep, rep.with_placements(parse_placements("S0")), DType::kF32, o)));
  for (json& t : g["steps"][0]["transfers"])
    if (t["dst"] == 1) t["src"] = 0;  // rank 0 holds rank 1's rows too
  EXPECT_MENTIONS(error_of([&] { plan_from_json(g.dump()); }), "is not one the planner assigns");
}

TEST(HostilePlan, MetadataIsRangeCheckedAndRecomputed) {
  const json good = rank_plan_json(2);
  auto edited = [&](const std::function<void(json&)>& edit) {
    json j = good;
    edit(j);
    return j.dump();
  };
  EXPECT_MENTIONS(error_of([&] { plan_from_json(edited([](json& j) { j["rank"] = (Index(1) << 32) + 1; })); }),
                  "rank 4294967297 is not in mesh 2x2");
  EXPECT_MENTIONS(error_of([&] { plan_from_json(edited([](json& j) { j["rank"] = -2; })); }),
                  "rank -2 is not in mesh 2x2");
  EXPECT_MENTIONS(error_of([&] { plan_from_json(edited([](json& j) { j["memory_budget_bytes"] = -5; })); }),
                  "'memory_budget_bytes' must be >= 0, got -5");
  EXPECT_MENTIONS(error_of([&] { plan_from_json(edited([](json& j) { j["peak_workspace_bytes"] = -1; })); }),
                  "peak workspace must be >= 0");
  EXPECT_MENTIONS(error_of([&] { plan_from_json(edited([](json& j) { j["steps"][0]["estimated_us"] = -1.0; })); }),
                  "step 0's estimate -1 us is not a finite time");
  EXPECT_MENTIONS(
      error_of([&] {
        plan_from_json(edited([](json& j) { j["steps"][0]["transfers"][0]["bytes"] = 18446744073709551615ull; }));
      }),
      "does not fit in 64 bits");
  EXPECT_MENTIONS(error_of([&] { plan_from_json(edited([](json& j) { j["bytes_moved"] = 1e30; })); }),
                  "does not fit in 64 bits");
  {
    Layout src = transpose_src();
    PlanOptions collective;
    collective.strategy = Strategy::kCollective;
    Plan needs_space = make_plan(src, src.with_placements(parse_placements("S1,S0")), DType::kF32, collective);
    ASSERT_GT(needs_space.peak_workspace_bytes(), 1);
    json j = json::parse(plan_to_json(needs_space));
    j["memory_budget_bytes"] = 1;
    EXPECT_MENTIONS(error_of([&] { plan_from_json(j.dump()); }), "over its memory budget of 1 bytes");
  }
  // Valid edits: stale or missing summaries are recomputed from the steps (not "0 B moved").
  const Plan original = plan_from_json(good.dump());
  ASSERT_GT(original.bytes_moved(), 0);
  const Plan zeroed = plan_from_json(edited([](json& j) {
    j["bytes_moved"] = 0;
    j["estimated_us"] = 0.0;
    j["peak_workspace_bytes"] = 0;
    j["steps"][0]["bytes_moved"] = 0;
    j.erase("candidates");
  }));
  EXPECT_EQ(zeroed.bytes_moved(), original.bytes_moved());
  EXPECT_EQ(zeroed.peak_workspace_bytes(), original.peak_workspace_bytes());
  EXPECT_EQ(zeroed.estimated_us(), original.estimated_us());
  EXPECT_EQ(zeroed.steps()[0].bytes_moved, original.steps()[0].bytes_moved);
  ASSERT_EQ(zeroed.candidates().size(), 1u);  // the chosen strategy's, rebuilt
  EXPECT_EQ(zeroed.candidates()[0].bytes_moved, original.bytes_moved());
  EXPECT_EQ(plan_to_json(plan_from_json(plan_to_json(zeroed))), plan_to_json(zeroed));
  // Estimates of a plan priced with an unknown profile are kept (range-checked), and must add up to a finite total.
  EXPECT_MENTIONS(error_of([&] {
                    plan_from_json(edited([](json& j) {
                      j["profile"] = "custom";
                      j["steps"][0]["estimated_us"] = 1.7e308;
                      j["steps"].push_back(json{{"kind", "local"},
                                                {"mesh_dims", json::array()},
                                                {"from", {"S1", "S0"}},
                                                {"to", {"S1", "S0"}},
                                                {"estimated_us", 1.7e308},
                                                {"bytes_moved", 0}});
                    }));
                  }),
                  "estimate inf us is not a finite time");
  // With a profile the estimates are recomputed.
  Profile slow = default_profile();
  slow.name = "custom";
  slow.step_overhead_us = 1e6;
  slow.nvlink.step_overhead_us = 1e6;  // whichever transport the plan's steps use
  slow.nvlink.fused_overhead_us = 1e6;
  const Plan repriced = plan_from_json(edited([](json& j) { j["profile"] = "custom"; }), slow);
  EXPECT_GE(repriced.estimated_us(), 1e6);
}

TEST(HostilePlan, DerivedFiguresNeverOverflow) {
  // A replicated layout holds more elements over its ranks than int64 counts: refused, never "-36028797018963968 B".
  Layout sharded(Mesh({1024}), parse_placements("S0"), Dims{Index(1) << 55});
  EXPECT_MENTIONS(error_of([&] { make_plan(sharded, sharded.with_placements(parse_placements("R")), DType::kI8, {}); }),
                  "than fit in 64 bits");
  // Boxes compare without wrapping.
  const Index max = std::numeric_limits<Index>::max();
  Box outer{Dims{0}, Dims{100}}, wrapping{Dims{max - 10}, Dims{20}};
  EXPECT_FALSE(contains(outer, wrapping));
  EXPECT_TRUE(is_empty(intersect(outer, wrapping)));
  EXPECT_MENTIONS(to_string(wrapping), "9223372036854775817");
  EXPECT_MENTIONS(error_of([&] {
                    volume(Box{Dims{0, 0}, Dims{Index(1) << 40, Index(1) << 40}});
                  }),
                  "more elements than fit in 64 bits");
}

// The issue's `plan --mesh 1x2 --from S3,S3 --to 'P(max),P(max)' --shape 1099511627776x64x1023x7 --dtype i64
// --memory-budget 1MiB`, which chose a plan with -7.5e18 B of workspace "within" the budget. Refused (by the plan's
// own range checks until the planner's workspace arithmetic is checked; UBSan reports planner.cpp until then).
TEST(HostilePlan, WorkspaceBeyondInt64IsNeverWithinABudget) {
  Layout big(Mesh({1, 2}), parse_placements("S3,S3"), Dims{Index(1) << 40, 64, 1023, 7});
  PlanOptions o;
  o.memory_budget_bytes = 1 << 20;
  error_of([&] { make_plan(big, big.with_placements(parse_placements("P(max),P(max)")), DType::kI64, o); });
}

TEST(HostilePlan, HugeTensorsPlanWithoutOverflowingIntermediateLayouts) {
  // The collective search passes over replicated states whose ranks together would hold more than int64 counts:
  // they are no way through, not a reason to refuse the request.
  Layout huge(Mesh({2}), parse_placements("S0"), Dims{Index(1) << 58, 16});
  PlanOptions o;
  o.strategy = Strategy::kP2P;
  Plan p = make_plan(huge, huge.with_placements(parse_placements("S1")), DType::kI8, o);
  EXPECT_GT(p.bytes_moved(), 0);
  EXPECT_GE(p.peak_workspace_bytes(), 0);
}

TEST(HostilePlan, CollectiveSearchHasABudget) {
  // 8-D mesh of 256 ranks, every dim changing: (ndim + 1)^8 placement states. The search stops at its budget.
  Layout src(Mesh({2, 2, 2, 2, 2, 2, 2, 2}), parse_placements("S0,S1,S2,S3,S0,S1,S2,S3"), Dims{256, 256, 256, 256});
  Layout dst = src.with_placements(parse_placements("S3,S2,S1,S0,S3,S2,S1,S0"));
  PlanOptions o;
  o.strategy = Strategy::kCollective;
  EXPECT_MENTIONS(error_of([&] { make_plan(src, dst, DType::kF32, o); }),
                  "the search for a chain of collectives exceeded its budget");
}

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "reshard_hostile_" + std::to_string(::getpid()) + "_" + name;
}

TEST(HostileFiles, OnlyRegularFilesUnderTheCapAreRead) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const std::string dir = temp_path("dir"), fifo = temp_path("fifo"), big = temp_path("big.json");
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);  // nobody writes it: opening it for reading must not wait
  {
    std::ofstream(big) << "{}";
    ASSERT_EQ(::truncate(big.c_str(), (17 << 20)), 0);  // sparse: 17 MiB without writing them
  }
  EXPECT_MENTIONS(error_of([&] { load_profile(dir); }), "is a directory");
  EXPECT_MENTIONS(error_of([&] { load_plan(dir); }), "is a directory");
  EXPECT_MENTIONS(error_of([&] { load_profile(fifo); }), "is not a regular file");
  EXPECT_MENTIONS(error_of([&] { load_plan(fifo); }), "is not a regular file");
  EXPECT_MENTIONS(error_of([&] { load_profile("/dev/zero"); }), "is not a regular file");
  EXPECT_MENTIONS(error_of([&] { load_plan("/dev/zero"); }), "is not a regular file");
  EXPECT_MENTIONS(error_of([&] { load_profile(big); }), "is larger than 16 MiB");
  EXPECT_MENTIONS(error_of([&] { read_text_file(big, "plan", 1 << 20); }),
                  "plan file '" + big + "' is larger than 1 MiB");
  EXPECT_MENTIONS(error_of([&] { load_plan(temp_path("missing")); }), "No such file or directory");
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(1));
  // A size of 0 in stat is not trusted either: /proc files are read to their end.
  EXPECT_NE(read_text_file("/proc/self/status", "status", 1 << 20).find("Name:"), std::string::npos);
  ::rmdir(dir.c_str());
  std::remove(fifo.c_str());
  std::remove(big.c_str());
}

TEST(HostileFiles, JsonNestingIsLimitedBeforeAnythingRecursive) {
  // An unknown profile member nested 100,000 deep used to be copied and dumped recursively (a stack overflow).
  std::string deep(100000, '[');
  deep += std::string(100000, ']');
  json profile = json::parse(profile_to_json(default_profile()));
  std::string text = profile.dump();
  text.insert(text.size() - 1, ", \"x\": " + deep);
  EXPECT_MENTIONS(error_of([&] { profile_from_json(text); }, ErrorKind::kParse),
                  "profile nests arrays or objects deeper than 64 levels");
  EXPECT_MENTIONS(error_of([&] { plan_from_json(deep); }, ErrorKind::kParse),
                  "plan nests arrays or objects deeper than 64 levels");
  // Nesting within the limit is kept as before.
  std::string fine = profile.dump();
  fine.insert(fine.size() - 1, ", \"x\": " + std::string(30, '[') + std::string(30, ']'));
  EXPECT_NE(profile_to_json(profile_from_json(fine)).find("\"x\""), std::string::npos);
}

TEST(HostileFiles, ProfileFiguresThatWouldOverflowEstimatesAreRefused) {
  const json base = json::parse(profile_to_json(default_profile()));
  auto refused = [&](const std::function<void(json&)>& edit, const std::string& needle) {
    json j = base;
    edit(j);
    EXPECT_MENTIONS(error_of([&] { profile_from_json(j.dump()); }), needle);
  };
  refused([](json& j) { j["intra_node"]["p2p"]["bandwidth_GBps"] = 1e-300; }, "a bandwidth in [0.001, 1e+09] GB/s");
  refused([](json& j) { j["copy"]["bandwidth_GBps"] = 1e300; }, "a bandwidth in");
  refused([](json& j) { j["inter_node"]["all_gather"]["alpha_us"] = 1e300; }, "a time in [0, 1e+09] us");
  refused([](json& j) { j["step_overhead_us"] = 1e20; }, "'step_overhead_us' must be >= 0: a time");
  refused(
      [](json& j) {
        j["intra_node"]["p2p"]["samples"] = {{1e300, 5.0}, {2e300, 6.0}};
      },
      "must be [bytes in (0, 2^63], us in (0, 1e12]]");
  // What the loader accepts prices every size with a finite time.
  Profile slowest = default_profile();
  slowest.intra_node.p2p = {1e9, 1e-3, {}};
  slowest = profile_from_json(profile_to_json(slowest));
  EXPECT_TRUE(std::isfinite(slowest.intra_node.p2p.time_us(9.2e18)));
}

TEST(HostileText, EchoedInputCannotDriveTheTerminal) {
  EXPECT_EQ(printable("a\nb\x1b[31mc\td\r\x7f"), "a\\nb\\e[31mc\\td\\r\\x7f");
  EXPECT_EQ(printable("\xc2\x9b"), "\\xc2\\x9b");      // C1 control (CSI) as UTF-8
  EXPECT_EQ(printable("caf\xc3\xa9"), "caf\xc3\xa9");  // UTF-8 text stays
  EXPECT_EQ(printable("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(printable(std::string(300, 'x')).size(), 203u);
  for (const std::function<void()>& parse : std::vector<std::function<void()>>{
           [] { parse_shape("4x\x1b]0;pwned\x07"); }, [] { parse_mesh_shape("2\nx2"); },
           [] { parse_placements("S0,\x1b[2J"); }, [] { parse_dtype("f\n32"); }, [] { parse_strategy("p2p\r"); }}) {
    const std::string message = error_of(parse, ErrorKind::kParse);
    for (char c : message) EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 || c == 0x7f) << message;
  }
}

TEST(HostileText, NumbersSayWhatIsWrong) {
  EXPECT_MENTIONS(error_of([] { parse_shape("99999999999999999999x2"); }, ErrorKind::kParse),
                  "does not fit in 64 bits");
  EXPECT_MENTIONS(error_of([] { parse_mesh_shape("2x"); }, ErrorKind::kParse), "empty value");
  EXPECT_MENTIONS(error_of([] { parse_integer_or_fail("", "--rank"); }, ErrorKind::kParse), "--rank: empty value");
  EXPECT_MENTIONS(error_of([] { parse_integer_or_fail("-99999999999999999999", "--rank"); }, ErrorKind::kParse),
                  "does not fit in 64 bits");
  EXPECT_MENTIONS(error_of([] { parse_integer_or_fail("1e3", "--rank"); }, ErrorKind::kParse), "is not a whole number");
  EXPECT_MENTIONS(error_of([] { Mesh({2}).coord_of(-2); }), "rank -2 is not in mesh 2");
}

}  // namespace
}  // namespace reshard
