// Hierarchical all_reduce steps (Step::hierarchical, planner/src/plan/node_split.hpp) on the host backend with several
// "nodes" (Topology::ranks_per_node): a Partial source reduced within each node, across nodes one piece per member,
// gathered within the node again, the node stages on nccl or one-sided (Step::mixed); every element of every rank
// checked (sum, avg, min, max; f32 and bf16; converting; in batches), the bytes crossing between nodes against the
// least the layouts require, the plan file's round trip, and what a plan file may not say about it.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "host_runs.hpp"
#include "reshard/harness.hpp"
#include "reshard/plan_batch.hpp"
#include "reshard/plan_json.hpp"
#include "reshard/planner.hpp"
#include "reshard/program.hpp"

namespace reshard {
namespace {

struct Case {
  std::string name;
  std::vector<int> mesh;
  const char *from, *to;
  int ranks_per_node;
  Index crossing_pieces;  // bytes crossing between nodes, in units of the tensor's bytes / 2
  bool least;             // that is the least the layouts require (two nodes, one group over the whole world)
};

// (4) and (8) over nodes of 2 and 4, a 2-D mesh reduced over both dims, and one reduced over a dim whose groups span
// nodes while another dim stays Replicate.
std::vector<Case> cases() {
  // Four nodes: an all_reduce needs 2 (m - 1) / m of the tensor into each node, more than the least (one copy); a
  // Replicate dim beside: each replica's group reduces on its own.
  return {{"4_ranks_2_nodes", {4}, "P", "R", 2, 4, true},
          {"8_ranks_4_nodes", {8}, "P", "R", 2, 12, false},
          {"8_ranks_2_nodes", {8}, "P", "R", 4, 4, true},
          {"2x4_over_both_dims", {2, 4}, "P,P", "R,R", 2, 12, false},
          {"4x2_first_dim", {4, 2}, "P,R", "R,R", 4, 8, false}};
}

// Where the node stages of a hierarchical all_reduce run: transport nccl keeps them collectives; auto (peer access)
// runs them one-sided where that prices cheaper, as it does where NCCL is slow within a node too (the two-node
// emulation's profile: NCCL on sockets everywhere).
enum class NodeStages { kNccl, kOneSided };

// `slow`: a link between nodes 100 times slower than the built-in profile's, so that the split pays for its three
// stages at the small sizes the host backend checks quickly; with one-sided node stages, 400 times (two one-sided
// syncs a stage outweigh a small piece), and NCCL within a node as slow as between nodes before, 100 us more per call.
PlanOptions across_nodes(int ranks_per_node, bool slow = false, NodeStages stages = NodeStages::kNccl) {
  PlanOptions o;
  o.strategy = Strategy::kCollective;
  o.transport = stages == NodeStages::kNccl ? Transport::kNccl : Transport::kAuto;
  o.topology.ranks_per_node = ranks_per_node;
  if (slow)
    for (AlphaBeta* l : {&o.profile.inter_node.all_reduce, &o.profile.inter_node.reduce_scatter,
                         &o.profile.inter_node.all_gather, &o.profile.inter_node.p2p})
      l->bandwidth_GBps /= stages == NodeStages::kNccl ? 100 : 400;
  if (slow && stages == NodeStages::kOneSided)
    for (AlphaBeta* l : {&o.profile.intra_node.all_reduce, &o.profile.intra_node.reduce_scatter,
                         &o.profile.intra_node.all_gather, &o.profile.intra_node.p2p}) {
      l->samples.clear();  // the line alone
      l->bandwidth_GBps /= 100;
      l->alpha_us += 100;
    }
  return o;
}

class Hierarchical : public ::testing::TestWithParam<std::tuple<Case, NodeStages>> {};

TEST_P(Hierarchical, ReducesWithinNodesFirstEveryElementEveryOp) {
  const auto& [c, stages] = GetParam();
  const bool one_sided = stages == NodeStages::kOneSided;
  const Dims shape{128, 96};
  const Index elements = 128 * 96;
  for (const char* op : {"", "(avg)", "(min)", "(max)"}) {
    std::string from = c.from;
    for (size_t p = from.find('P'); p != std::string::npos; p = from.find('P', p + 1)) from.insert(p + 1, op);
    const Layout src(Mesh(c.mesh), parse_placements(from), shape);
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      const Plan plan = make_plan(src, src.with_placements(parse_placements(c.to)), dtype,
                                  across_nodes(c.ranks_per_node, true, stages));
      const std::string what = c.name + " " + from + " " + std::string(to_string(dtype));
      ASSERT_EQ(plan.steps().size(), 1u) << what;
      EXPECT_TRUE(plan.steps()[0].hierarchical) << what;
      EXPECT_EQ(plan.steps()[0].mixed, one_sided) << what;
      const nlohmann::json j = nlohmann::json::parse(plan_to_json(plan));
      EXPECT_EQ(j["inter_node_bytes"].get<Index>(), c.crossing_pieces * elements * element_size(dtype) / 2) << what;
      if (c.least) {
        EXPECT_EQ(j["inter_node_bytes"], j["min_inter_node_bytes"]) << what;
      }
      EXPECT_LE(j["min_inter_node_bytes"].get<Index>(), j["inter_node_bytes"].get<Index>()) << what;
      EXPECT_EQ(run_plan(plan, testing::quick_host_run()).wrong_elements, 0) << what;
      const Plan reloaded = plan_from_json(plan_to_json(plan));
      EXPECT_TRUE(reloaded.steps()[0].hierarchical);
      EXPECT_EQ(reloaded.steps()[0].mixed, one_sided);
      EXPECT_EQ(reloaded.steps()[0].bytes_moved, plan.steps()[0].bytes_moved);  // (estimates: the built-in profile)
      EXPECT_EQ(run_plan(reloaded, testing::quick_host_run()).wrong_elements, 0) << what;
    }
  }
}

std::string param_name(const ::testing::TestParamInfo<std::tuple<Case, NodeStages>>& p) {
  return std::get<0>(p.param).name + (std::get<1>(p.param) == NodeStages::kNccl ? "_nccl_nodes" : "_one_sided_nodes");
}

INSTANTIATE_TEST_SUITE_P(Meshes, Hierarchical,
                         ::testing::Combine(::testing::ValuesIn(cases()),
                                            ::testing::Values(NodeStages::kNccl, NodeStages::kOneSided)),
                         param_name);

// Cheaper only where the tensor is large enough; one node, one member per node, pieces of unequal size and integer
// averages stay flat.
TEST(HierarchicalChoice, FlatWhereItCannotHelpOrRun) {
  auto first = [](std::vector<int> mesh, const char* from, const char* to, Dims shape, DType dtype, int rpn) {
    const Layout src(Mesh(mesh), parse_placements(from), shape);
    return make_plan(src, src.with_placements(parse_placements(to)), dtype, across_nodes(rpn)).steps()[0];
  };
  EXPECT_TRUE(first({4}, "P", "R", Dims{1024, 1024}, DType::kF32, 2).hierarchical);
  EXPECT_FALSE(first({4}, "P", "R", Dims{1024, 1024}, DType::kF32, 4).hierarchical);         // one node
  EXPECT_FALSE(first({2, 2}, "P,R", "R,R", Dims{1024, 1024}, DType::kF32, 2).hierarchical);  // one member per node
  EXPECT_FALSE(first({4}, "P", "R", Dims{1023, 1}, DType::kF32, 2).hierarchical);            // 1023 in two pieces
  EXPECT_FALSE(first({4}, "P(avg)", "R", Dims{1024, 1024}, DType::kI32, 2).hierarchical);
  EXPECT_TRUE(first({4}, "P(sum)", "R", Dims{1024, 1024}, DType::kI32, 2).hierarchical);
}

// A converting plan reduces in its own dtype into scratch and converts once, as the flat all_reduce does (one-sided:
// the gather reads the peers' scratch straight into the output); a batch runs hierarchical members beside flat ones
// (their split communicators among the batch's; one-sided node stages beside the other members' one-sided parts).
TEST(HierarchicalRuns, ConvertingAndInBatches) {
  for (NodeStages stages : {NodeStages::kNccl, NodeStages::kOneSided}) {
    const bool one_sided = stages == NodeStages::kOneSided;
    const Layout src(Mesh({4}), parse_placements("P"), Dims{256, 64});
    const Layout dst = src.with_placements(parse_placements("R"));
    const Plan converting = make_converting_plan(src, dst, DType::kBF16, DType::kF32, across_nodes(2, true, stages));
    ASSERT_TRUE(converting.steps()[0].hierarchical);
    EXPECT_EQ(converting.steps()[0].mixed, one_sided);
    EXPECT_EQ(run_plan(converting, testing::quick_host_run()).wrong_elements, 0);
    const Layout big(Mesh({4}), parse_placements("P"), Dims{256, 64});
    auto plan = [&](const Layout& s, const char* to, DType dtype) {
      return std::make_shared<const Plan>(
          make_plan(s, s.with_placements(parse_placements(to)), dtype, across_nodes(2, true, stages)));
    };
    const Layout small(Mesh({4}), parse_placements("P"), Dims{8, 8});
    const PlanBatch batch({plan(big, "R", DType::kF32), plan(small, "R", DType::kF32),
                           plan(Layout(Mesh({4}), parse_placements("S0"), Dims{64, 32}), "R", DType::kF32),
                           plan(big, "R", DType::kBF16)});
    ASSERT_TRUE(batch.plan(0).steps()[0].hierarchical);
    EXPECT_EQ(batch.plan(0).steps()[0].mixed, one_sided);
    EXPECT_EQ(batch.plan(3).steps()[0].mixed, one_sided);
    ASSERT_FALSE(batch.plan(1).steps()[0].hierarchical);
    const RunResult r = run_batch(batch, testing::quick_host_run());
    EXPECT_EQ(r.wrong_elements, 0) << r.first_error;
    EXPECT_GT(r.checked_elements, 0);
  }
}

// One-sided node stages of an all_reduce that is not the plan's first step read the peers' intermediate tensors in
// their workspaces: (4,2) [P,R] -> [R,S1] over nodes of 4 partitions locally first, then reduces over dim 0.
TEST(HierarchicalRuns, OneSidedNodeStagesAfterAnotherStep) {
  const Layout src(Mesh({4, 2}), parse_placements("P,R"), Dims{256, 64});
  const Plan plan = make_plan(src, src.with_placements(parse_placements("R,S1")), DType::kF32,
                              across_nodes(4, true, NodeStages::kOneSided));
  size_t at = plan.steps().size();
  for (size_t i = 0; i < plan.steps().size(); ++i)
    if (plan.steps()[i].hierarchical && plan.steps()[i].mixed) at = i;
  ASSERT_LT(at, plan.steps().size()) << plan_to_json(plan);
  EXPECT_GT(at, 0u) << plan_to_json(plan);
  const RunResult r = run_plan(plan, testing::quick_host_run());
  EXPECT_EQ(r.wrong_elements, 0) << r.first_error;
  EXPECT_GT(r.checked_elements, 0);
}

// A plan file may mark only an all_reduce whose groups split by node.
TEST(HierarchicalFiles, RefusesWhatCannotRunSo) {
  const Layout src(Mesh({4}), parse_placements("P"), Dims{1024, 64});
  auto edited = [&](const Layout& s, const char* to, int rpn, auto edit) {
    nlohmann::json j = nlohmann::json::parse(
        plan_to_json(make_plan(s, s.with_placements(parse_placements(to)), DType::kF32, across_nodes(rpn))));
    edit(j);
    return j.dump();
  };
  auto refused = [](const std::string& text, const std::string& needle) {
    try {
      plan_from_json(text);
      ADD_FAILURE() << "accepted; expected: " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  refused(edited(src, "R", 4, [](nlohmann::json& j) { j["steps"][0]["hierarchical"] = true; }),
          "a hierarchical all_reduce over mesh dims 0 needs groups");
  const Layout s0(Mesh({4}), parse_placements("S0"), Dims{1024, 64});
  refused(edited(s0, "R", 2, [](nlohmann::json& j) { j["steps"][0]["hierarchical"] = true; }),
          "only an all_reduce runs hierarchically");
  refused(edited(src, "R", 2, [](nlohmann::json& j) { j["steps"][0]["hierarchical"] = "yes"; }), "hierarchical");
  // One-sided node stages: only on a hierarchical all_reduce.
  const Layout wide(Mesh({4}), parse_placements("P"), Dims{8192, 8192});
  auto mixed_edit = [&](bool hierarchical, bool buffers_change) {
    nlohmann::json j =
        nlohmann::json::parse(plan_to_json(make_plan(wide, wide.with_placements(parse_placements("R")), DType::kF32,
                                                     across_nodes(2, false, NodeStages::kOneSided))));
    j["steps"][0]["mixed"] = true;
    if (!hierarchical) j["steps"][0].erase("hierarchical");
    if (buffers_change) j["buffers_change"] = true;
    return j.dump();
  };
  EXPECT_TRUE(plan_from_json(mixed_edit(true, false)).steps()[0].mixed);
  refused(mixed_edit(false, false), "only p2p steps on nccl (not staged, not fused) and hierarchical all_reduce");
  // For changing buffers too (priced with mapping the members' tensors on every call: buffers_change_test.cpp).
  const Plan changing = plan_from_json(mixed_edit(true, true));
  EXPECT_TRUE(changing.buffers_change() && changing.steps()[0].mixed);
  EXPECT_GT(changing.estimated_us(), plan_from_json(mixed_edit(true, false)).estimated_us());
  EXPECT_EQ(run_plan(changing, testing::quick_host_run()).wrong_elements, 0);
  // Flat where the planner chose hierarchical: accepted, priced as written.
  const Plan flat = plan_from_json(edited(src, "R", 2, [](nlohmann::json& j) { j["steps"][0].erase("hierarchical"); }));
  EXPECT_FALSE(flat.steps()[0].hierarchical);
  EXPECT_EQ(run_plan(flat, testing::quick_host_run()).wrong_elements, 0);
}

}  // namespace
}  // namespace reshard
