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

// Every element some rank of a node needs and no rank of that node holds, counted one by one; for a Partial source,
// held where the node holds every contribution (ranks at every coordinate of the Partial dims).
Index brute_minimum(const Layout& a, const Layout& b, int ranks_per_node, int es) {
  const int n = a.mesh().world_size();
  std::vector<int> partial_dims;
  int classes = 1;
  for (int k = 0; k < a.mesh().ndim(); ++k)
    if (a.placement(k).is_partial()) partial_dims.push_back(k), classes *= a.mesh().dim_size(k);
  auto class_of = [&](int r) {
    int id = 0;
    for (int k : partial_dims) id = id * a.mesh().dim_size(k) + static_cast<int>(a.mesh().coord_of(r)[k]);
    return id;
  };
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
      bool needed = false;
      std::vector<bool> held(static_cast<size_t>(classes), false);
      for (int r = first; r < std::min(n, first + ranks_per_node); ++r) {
        needed = needed || in(b.box(r));
        if (in(a.box(r))) held[class_of(r)] = true;
      }
      total += needed && std::find(held.begin(), held.end(), false) != held.end();
    }
  }
  return total * es;
}

// The block (node x node) traffic of every step, summed off the diagonal.
double off_diagonal_bytes(const Plan& plan, int ranks_per_node) {
  double blocks = 0;
  for (size_t i = 0; i < plan.steps().size(); ++i) {
    const detail::BlockTraffic t = detail::block_traffic(plan, i, ranks_per_node);
    for (int x = 0; x < t.cells; ++x)
      for (int y = 0; y < t.cells; ++y)
        if (x != y) blocks += t.bytes[static_cast<size_t>(x) * t.cells + y];
  }
  return blocks;
}

TEST(NodeTraffic, CrossingAndMinimumAgreeWithIndependentCounts) {
  const testing::LayoutCase cases[] = {{{4}, "S0", "R", {10, 3}},          {{2, 2}, "S0,S1", "S1,S0", {8, 6}},
                                       {{2, 2}, "S0,S0", "S1,S1", {8, 8}}, {{4}, "P", "R", {6, 4}},
                                       {{2, 3}, "S0,R", "R,S1", {7, 11}},  {{2, 2, 2}, "S0,S1,S0", "S1,S0,R", {16, 8}},
                                       {{4}, "R", "S1", {5, 9}},           {{3, 2}, "S1,S0", "S0,S0", {9, 10}}};
  int checked = 0, multi_node = 0;
  for (const testing::LayoutCase& c : cases) {
    const Layout src = c.src(), dst = c.dst();
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
        const double blocks = off_diagonal_bytes(plan, rpn);
        const std::string what = src.str() + " -> [" + c.to + "] " + std::string(to_string(s)) + ", " +
                                 std::to_string(rpn) + " ranks per node";
        EXPECT_EQ(static_cast<double>(nodes.crossing), blocks) << what;
        ASSERT_TRUE(nodes.minimum) << what;
        EXPECT_EQ(*nodes.minimum, brute_minimum(src, dst, rpn, 4)) << what;
        EXPECT_LE(*nodes.minimum, nodes.crossing) << what;
        const std::string text = plan_to_json(plan);
        const bool spans = src.mesh().world_size() > rpn;
        multi_node += spans;
        EXPECT_EQ(text.find("\"inter_node_bytes\": " + std::to_string(nodes.crossing)) != std::string::npos, spans)
            << what << "\n"
            << text;
        EXPECT_EQ(plan_table(plan).find("cross between nodes") != std::string::npos, spans) << what;
        EXPECT_EQ(plan_to_json(plan_from_json(text)), text) << what;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 50);
  EXPECT_GT(multi_node, 40);
}

// Hierarchical all_reduce steps (Step::hierarchical): the same agreement; over two nodes the least is reached.
TEST(NodeTraffic, HierarchicalAllReducesCrossAsCounted) {
  const std::pair<testing::LayoutCase, int> cases[] = {{{{4}, "P", "R", {512, 512}}, 2},
                                                       {{{8}, "P(avg)", "R", {512, 256}}, 4},
                                                       {{{8}, "P", "R", {512, 512}}, 2},
                                                       {{{2, 4}, "P,P", "R,R", {512, 512}}, 2}};
  for (const auto& [c, rpn] : cases) {
    PlanOptions o;
    o.strategy = Strategy::kCollective;
    o.topology.ranks_per_node = rpn;
    for (AlphaBeta* l : {&o.profile.inter_node.all_reduce, &o.profile.inter_node.reduce_scatter})
      l->bandwidth_GBps /= 100;  // so that the split pays at these sizes
    const Plan plan = make_plan(c.src(), c.dst(), DType::kF32, o);
    const std::string what = c.src().str() + " -> [" + c.to + "], " + std::to_string(rpn);
    ASSERT_TRUE(plan.steps().at(0).hierarchical) << what;
    const detail::NodeTraffic nodes = detail::node_traffic(plan);
    const double blocks = off_diagonal_bytes(plan, rpn);
    EXPECT_EQ(static_cast<double>(nodes.crossing), blocks) << what;
    ASSERT_TRUE(nodes.minimum) << what;
    EXPECT_EQ(*nodes.minimum, brute_minimum(c.src(), c.dst(), rpn, 4)) << what;
    if (c.src().mesh().size() == 2 * rpn) {
      EXPECT_EQ(nodes.crossing, *nodes.minimum) << what;
    }
    EXPECT_LE(*nodes.minimum, nodes.crossing) << what;
  }
}

}  // namespace
}  // namespace reshard
