// Bytes between nodes: what a plan sends between nodes equals the block (node x node) traffic summed off the
// diagonal, the least the layouts require equals an element-by-element count, no plan crosses less than that least,
// and both figures appear in the plan's JSON (recomputed on load) and table when the world spans nodes.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "report/node_traffic.hpp"
#include "report/plan_traffic.hpp"
#include "reshard/plan_format.hpp"
#include "reshard/plan_json.hpp"
#include "reshard/planner.hpp"
#include "test_plans.hpp"

namespace reshard {
namespace {

// Every element some rank of a node needs and no rank of that node holds, counted one by one.
Index brute_minimum(const Layout& a, const Layout& b, int ranks_per_node, int es) {
  const int n = a.mesh().world_size();
  const Dims& shape = a.global_shape();
  Index total = 0, count = 1;
  for (Index e : shape) count *= e;
  for (int first = 0; first < n; first += ranks_per_node) {
    for (Index flat = 0; flat < count; ++flat) {
      Dims at(shape.size());
      Index rest = flat;
      for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
        at[d] = rest % shape[d];
        rest /= shape[d];
      }
      auto in = [&](const Box& box) {
        for (int d = 0; d < shape.size(); ++d)
          if (at[d] < box.offset[d] || at[d] >= box.offset[d] + box.shape[d]) return false;
        return true;
      };
      bool needed = false, held = false;
      for (int r = first; r < std::min(n, first + ranks_per_node); ++r) {
        needed = needed || in(b.box(r));
        held = held || in(a.box(r));
      }
      total += needed && !held;
    }
  }
  return total * es;
}

TEST(NodeTraffic, CrossingAndMinimumAgreeWithIndependentCounts) {
  const testing::LayoutCase cases[] = {
      {{4}, "S0", "R", {10, 3}},          {{2, 2}, "S0,S1", "S1,S0", {8, 6}}, {{2, 2}, "S0,S0", "S1,S1", {8, 8}},
      {{4}, "P", "R", {6, 4}},            {{2, 3}, "S0,R", "R,S1", {7, 11}},  {{2, 2, 2}, "S0,S1,S0", "S1,S0,R", {16, 8}},
      {{4}, "R", "S1", {5, 9}},           {{3, 2}, "S1,S0", "S0,S0", {9, 10}}};
  int checked = 0, multi_node = 0;
  for (const testing::LayoutCase& c : cases) {
    const Layout src = c.src(), dst = c.dst();
    const bool partial = std::string(c.from).find('P') != std::string::npos;
    for (int rpn : {1, 2, 3}) {
      for (Strategy s : {Strategy::kCollective, Strategy::kP2P, Strategy::kHybrid}) {
        PlanOptions o;
        o.strategy = s;
        o.transport = Transport::kNccl;
        o.topology.ranks_per_node = rpn;
        std::optional<Plan> planned;
        try {
          planned = make_plan(src, dst, DType::kF32, o);
        } catch (const Error&) {  // hybrid has no plan on some pairs
          continue;
        }
        const Plan& plan = *planned;
        const detail::NodeTraffic nodes = detail::node_traffic(plan);
        double blocks = 0;
        for (size_t i = 0; i < plan.steps().size(); ++i) {
          const detail::BlockTraffic t = detail::block_traffic(plan, i, rpn);
          for (int x = 0; x < t.cells; ++x)
            for (int y = 0; y < t.cells; ++y)
              if (x != y) blocks += t.bytes[static_cast<size_t>(x) * t.cells + y];
        }
        const std::string what = src.str() + " -> [" + c.to + "] " + std::string(to_string(s)) + ", " +
                                 std::to_string(rpn) + " ranks per node";
        EXPECT_EQ(static_cast<double>(nodes.crossing), blocks) << what;
        if (partial) {
          EXPECT_FALSE(nodes.minimum) << what;
        } else {
          ASSERT_TRUE(nodes.minimum) << what;
          EXPECT_EQ(*nodes.minimum, brute_minimum(src, dst, rpn, 4)) << what;
          EXPECT_LE(*nodes.minimum, nodes.crossing) << what;
        }
        const std::string text = plan_to_json(plan);
        const bool spans = src.mesh().world_size() > rpn;
        multi_node += spans;
        EXPECT_EQ(text.find("\"inter_node_bytes\": " + std::to_string(nodes.crossing)) != std::string::npos, spans)
            << what << "\n" << text;
        EXPECT_EQ(plan_table(plan).find("cross between nodes") != std::string::npos, spans) << what;
        EXPECT_EQ(plan_to_json(plan_from_json(text)), text) << what;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 50);
  EXPECT_GT(multi_node, 40);
}

}  // namespace
}  // namespace reshard
