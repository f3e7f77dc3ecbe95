// A plan's candidates: what the planner leaves to their first read (the losing candidates' reports, and the figures of
// candidates shown to cost more than a cheaper one) comes out as if every candidate had been planned in full.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "reshard/plan_json.hpp"
#include "reshard/planner.hpp"
#include "search/planner_reference.hpp"
#include "square_case.hpp"

namespace reshard {
namespace {

using Case = testing::SquareCase;
using testing::layouts;

// Large tensors (p2p wins: the collective and hybrid searches stop at its price), small ones (collectives win).
const Case kCases[] = {
    {"S0,S0", "S1,S1", {4, 4}, 16384}, {"S0,S1", "S1,S0", {4, 4}, 16384}, {"S0,S0", "S1,S1", {2, 2}, 64},
    {"S0,S1", "S1,S0", {8, 8}, 4096},  {"R,S0", "S0,R", {2, 4}, 1024},    {"P,S1", "S0,S0", {2, 2}, 512},
};

std::vector<PlanOptions> option_sets() {
  std::vector<PlanOptions> out(4);
  out[1].topology.ranks_per_node = 16;  // one node: nvlink candidates too
  out[1].topology.peer_access = true;
  out[2].buffers_change = true;
  out[2].topology = out[1].topology;
  // A profile built in code with negative times (no loaded profile has them): every candidate is searched in full.
  out[3] = out[2];
  out[3].profile.copy.alpha_us = -1;
  out[3].profile.nvlink.map_us = -5;
  return out;
}

// The plan's JSON, or its error.
template <class F>
std::string json_or_error(F plan) {
  try {
    return plan_to_json(plan());
  } catch (const Error& e) {
    return e.what();
  }
}

TEST(PendingCandidates, EqualTheReferencePlannersEveryFigure) {
  for (const Case& c : kCases)
    for (const PlanOptions& o : option_sets()) {
      const auto [src, dst] = layouts(c);
      const std::string reference =
          json_or_error([&] { return detail::make_plan_reference(src, dst, DType::kBF16, o, std::nullopt); });
      EXPECT_EQ(json_or_error([&] { return make_plan(src, dst, DType::kBF16, o); }), reference)
          << src.str() << " -> " << c.to;
      EXPECT_EQ(json_or_error([&] { return make_rank_plan(src, dst, DType::kBF16, 1, o); }),
                json_or_error([&] { return detail::make_plan_reference(src, dst, DType::kBF16, o, 1); }))
          << src.str() << " -> " << c.to;
    }
}

// Each candidate of an auto plan as a plan of its strategy alone prices it (on its transport).
TEST(PendingCandidates, EqualEachStrategyPlannedAlone) {
  for (const Case& c : kCases) {
    const auto [src, dst] = layouts(c);
    const PlanOptions base = option_sets()[1];
    const Plan plan = make_plan(src, dst, DType::kBF16, base);
    for (const Candidate& x : plan.candidates()) {
      PlanOptions o = base;
      o.strategy = x.strategy;
      o.transport = x.strategy == Strategy::kCollective ? Transport::kAuto : x.transport;
      if (!x.available) {
        EXPECT_THROW(make_plan(src, dst, DType::kBF16, o), Error) << to_string(x.strategy) << ": " << x.reason;
        continue;
      }
      // A step that mixes transports (within a node one-sided, between nodes on nccl) is offered under transport
      // auto only: such a candidate is the strategy's nccl candidate planned with transport auto.
      const bool mixes = x.route.find("/mixed") != std::string::npos;
      if (mixes) o.transport = Transport::kAuto;
      const Plan alone = make_plan(src, dst, DType::kBF16, o);
      if (!mixes) {
        ASSERT_EQ(alone.candidates().size(), 1u);
      }
      const auto same = std::find_if(alone.candidates().begin(), alone.candidates().end(), [&](const Candidate& other) {
        return other.strategy == x.strategy && other.transport == x.transport;
      });
      ASSERT_NE(same, alone.candidates().end()) << x.route;
      const Candidate& y = *same;
      EXPECT_EQ(x.estimated_us, y.estimated_us) << x.route;
      EXPECT_EQ(x.route, y.route);
      EXPECT_EQ(x.steps, y.steps);
      EXPECT_EQ(x.bytes_moved, y.bytes_moved);
      EXPECT_EQ(x.peak_workspace_bytes, y.peak_workspace_bytes) << x.route;
    }
  }
}

// Copies made before the first read, spec() and concurrent first reads all see the completed candidates.
TEST(PendingCandidates, CopiesSpecAndThreadsAgree) {
  const auto [src, dst] = layouts(kCases[0]);
  const std::string expected =
      candidates_to_json(detail::make_plan_reference(src, dst, DType::kBF16, PlanOptions{}, std::nullopt));
  const Plan plan = make_plan(src, dst, DType::kBF16);
  const Plan copy = plan;  // before any read
  EXPECT_EQ(candidates_to_json(copy), expected);
  EXPECT_EQ(candidates_to_json(plan), expected);
  const Plan fresh = make_plan(src, dst, DType::kBF16);
  EXPECT_EQ(Plan(fresh.spec()).candidates().size(), plan.candidates().size());
  EXPECT_EQ(candidates_to_json(Plan(make_plan(src, dst, DType::kBF16).spec())), expected);

  const Plan shared = make_plan(src, dst, DType::kBF16);
  std::vector<std::string> seen(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < seen.size(); ++i) threads.emplace_back([&, i] { seen[i] = candidates_to_json(shared); });
  for (std::thread& t : threads) t.join();
  for (const std::string& s : seen) EXPECT_EQ(s, expected);
}

}  // namespace
}  // namespace reshard
