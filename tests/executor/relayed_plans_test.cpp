// Relayed p2p steps (relays.hpp) and steps that mix transports (Step::mixed: within a node one-sided, between nodes
// on nccl) on the host backend with several "nodes" (Topology::ranks_per_node): each byte a node needs from another
// crosses into it once, every element of every rank checked, as global plans, reloaded from JSON and as every rank's
// own plan; what a plan file may not say about relays and transports is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "host_runs.hpp"
#include "reshard/executor.hpp"
#include "reshard/harness.hpp"
#include "reshard/host_backend.hpp"
#include "reshard/pattern.hpp"
#include "reshard/plan_batch.hpp"
#include "reshard/plan_json.hpp"
#include "reshard/planner.hpp"
#include "reshard/program.hpp"
#include "reshard/text.hpp"

namespace reshard {
namespace {

struct RelayCase {
  std::string name;
  Layout src, dst;
  int ranks_per_node;
};

std::vector<RelayCase> relay_cases() {
  const Dims shape{96, 40};
  auto same = [&](const std::string& name, std::vector<int> mesh, const char* from, const char* to, int rpn) {
    Layout src(Mesh(mesh), parse_placements(from), shape);
    return RelayCase{name, src, src.with_placements(parse_placements(to)), rpn};
  };
  return {same("S0_to_R_on_2x2_nodes", {4}, "S0", "R", 2), same("S0_to_R_on_4x2_nodes", {8}, "S0", "R", 2),
          same("S0S1_to_RR_on_2x4_nodes", {2, 4}, "S0,S1", "R,R", 4),
          same("S0S1_to_S1R_on_4x2_nodes", {4, 2}, "S0,S1", "S1,R", 2),
          same("uneven_S1_to_R_on_3_nodes", {6}, "S1", "R", 2),
          // Replicated sources: every rank of a node reads a block held on other nodes from one holder (per node).
          same("S0R_to_RR_on_4x2_nodes", {2, 4}, "S0,R", "R,R", 2),
          same("S0R_to_RR_on_3x2_nodes", {3, 2}, "S0,R", "R,R", 2),
          // Between meshes: training ranks 0,1 (one node) -> serving ranks 2,3 (the other), both needing everything.
          RelayCase{"cross_mesh_0_1_to_2_3", Layout(Mesh({2}, {0, 1}, 4), parse_placements("S0"), shape),
                    Layout(Mesh({2}, {2, 3}, 4), parse_placements("R"), shape), 2},
          RelayCase{"cross_mesh_replicated_0_1_to_2_3", Layout(Mesh({2}, {0, 1}, 4), parse_placements("R"), shape),
                    Layout(Mesh({2}, {2, 3}, 4), parse_placements("R"), shape), 2}};
}

PlanOptions relaying(int ranks_per_node, Relay relay = Relay::kAlways) {
  PlanOptions o;
  o.strategy = Strategy::kP2P;
  o.transport = Transport::kNccl;
  o.relay = relay;
  o.topology.ranks_per_node = ranks_per_node;
  return o;
}

// The transfers of `plan` that rank r sends, receives or relays, sorted by (src, dst, via).
std::vector<Transfer> involving(const Plan& plan, int r) {
  std::vector<Transfer> out;
  for (const Transfer& t : plan.steps().front().transfers)
    if (t.src == r || t.dst == r || t.via == r) out.push_back(t);
  std::sort(out.begin(), out.end(),
            [](const Transfer& x, const Transfer& y) { return std::tie(x.src, x.dst) < std::tie(y.src, y.dst); });
  return out;
}

// The plan as a mixed step's (Step::mixed) when `mixed`: the same plan with its p2p step marked so, loaded as a file.
Plan as_mixed(const Plan& plan, bool mixed) {
  if (!mixed) return plan;
  nlohmann::json j = nlohmann::json::parse(plan_to_json(plan));
  j["steps"][0]["mixed"] = true;
  return plan_from_json(j.dump());
}

// Runs every rank's own plan (`plan_of(r)`) on host threads; returns the wrong elements over all ranks.
template <class PlanOf>
Index run_rank_plans(const RelayCase& c, PlanOf plan_of) {
  const int n = c.src.mesh().world_size();
  HostWorld world(n);
  std::atomic<Index> wrong{0};
  run_ranks(
      n,
      [&](int r) {
        const Plan mine = plan_of(r);
        HostCommunicator comm(world, r);
        HostDevice device;
        Executor exec(mine, comm, device);
        std::vector<std::byte> in(exec.input_bytes()), out(exec.output_bytes());
        if (c.src.mesh().contains(r)) fill_pattern(in.data(), c.src.box(r), c.src.global_shape(), mine.dtype());
        exec.run({in.data(), in.size()}, {out.data(), out.size()}, nullptr);
        if (c.dst.mesh().contains(r))
          wrong += count_mismatches(out.data(), c.dst.box(r), c.dst.global_shape(), mine.dtype());
      },
      &world);
  return wrong.load();
}

class RelayedPlans : public ::testing::TestWithParam<RelayCase> {};

// Relayed, mixing transports (within a node one-sided, between nodes on nccl), and both.
TEST_P(RelayedPlans, CrossEachNodeOnceAndDeliverEveryElement) {
  const RelayCase& c = GetParam();
  const nlohmann::json flat = nlohmann::json::parse(
      plan_to_json(make_plan(c.src, c.dst, DType::kBF16, relaying(c.ranks_per_node, Relay::kNever))));
  for (const auto& [relayed, mixed] : {std::pair{true, false}, std::pair{false, true}, std::pair{true, true}}) {
    SCOPED_TRACE(cat(relayed ? "relayed" : "flat", mixed ? ", mixed" : ""));
    const PlanOptions o = relaying(c.ranks_per_node, relayed ? Relay::kAlways : Relay::kNever);
    const Plan plan = as_mixed(make_plan(c.src, c.dst, DType::kBF16, o), mixed);
    ASSERT_EQ(plan.steps().front().relayed, relayed) << plan_to_json(plan);
    ASSERT_EQ(plan.steps().front().mixed, mixed);
    const nlohmann::json j = nlohmann::json::parse(plan_to_json(plan));
    ASSERT_TRUE(j["min_inter_node_bytes"].is_number());
    if (relayed) {  // at the least the layouts require; flat, the same layouts cross more
      EXPECT_EQ(j["inter_node_bytes"], j["min_inter_node_bytes"]);
      EXPECT_GT(flat["inter_node_bytes"].get<Index>(), j["inter_node_bytes"].get<Index>());
    }
    // What the ranks' programs send between nodes is what the plan says it sends.
    Index sent = 0;
    for (int r = 0; r < c.src.mesh().world_size(); ++r)
      sent += exchange_bytes_to_other_nodes(lower(plan, r), plan.topology());
    EXPECT_EQ(sent, j["inter_node_bytes"].get<Index>());
    EXPECT_EQ(run_plan(plan, testing::quick_host_run()).wrong_elements, 0);
    const Plan reloaded = plan_from_json(plan_to_json(plan));
    EXPECT_EQ(plan_to_json(reloaded), plan_to_json(plan));
    EXPECT_EQ(run_plan(reloaded, testing::quick_host_run()).wrong_elements, 0);
    // Every rank with its own plan: the same transfers as the global plan's, and together every element delivered.
    std::atomic<int> differing{0};
    EXPECT_EQ(run_rank_plans(c,
                             [&](int r) {
                               Plan mine = as_mixed(make_rank_plan(c.src, c.dst, DType::kBF16, r, o), mixed);
                               if (!(involving(mine, r) == involving(plan, r))) ++differing;
                               return mine;
                             }),
              0);
    EXPECT_EQ(differing.load(), 0);
  }
}

// Batches of several tensors with relayed and mixed members: the members' second phases run after the merged step,
// every element of every member checked; the batch's programs send between nodes what its members' plans say.
TEST_P(RelayedPlans, BatchesOfRelayedMembersDeliverEveryElement) {
  const RelayCase& c = GetParam();
  const Plan flat = make_plan(c.src, c.dst, DType::kBF16, relaying(c.ranks_per_node, Relay::kNever));
  for (const auto& [relayed, mixed] : {std::pair{true, false}, std::pair{false, true}, std::pair{true, true}}) {
    SCOPED_TRACE(cat(relayed ? "relayed" : "flat", mixed ? ", mixed" : ""));
    const PlanOptions o = relaying(c.ranks_per_node, relayed ? Relay::kAlways : Relay::kNever);
    const auto plan = std::make_shared<const Plan>(as_mixed(make_plan(c.src, c.dst, DType::kBF16, o), mixed));
    ASSERT_EQ(plan->steps().front().relayed, relayed);
    const auto f32 = std::make_shared<const Plan>(as_mixed(make_plan(c.src, c.dst, DType::kF32, o), mixed));
    const PlanBatch batch({plan, std::make_shared<const Plan>(flat), f32, plan});
    Index planned = 0;
    for (const auto& p : batch.plans())
      planned += nlohmann::json::parse(plan_to_json(*p))["inter_node_bytes"].get<Index>();
    Index sent = 0;
    for (int r = 0; r < c.src.mesh().world_size(); ++r)
      sent += exchange_bytes_to_other_nodes(lower(batch, r), plan->topology());
    EXPECT_EQ(sent, planned);
    const RunResult run = run_batch(batch, testing::quick_host_run());
    EXPECT_EQ(run.wrong_elements, 0) << run.first_error;
    EXPECT_GT(run.checked_elements, 0);
  }
  // make_plan_batch relays the members of a batch as it would each alone.
  const BatchEntry entry{c.src, c.dst, DType::kBF16};
  const BatchEntry entries[] = {entry, entry};
  const PlanBatch planned = make_plan_batch(entries, relaying(c.ranks_per_node, Relay::kAlways));
  for (const auto& p : planned.plans()) EXPECT_TRUE(p->steps().front().relayed);
  EXPECT_EQ(run_batch(planned, testing::quick_host_run()).wrong_elements, 0);
}

INSTANTIATE_TEST_SUITE_P(Cases, RelayedPlans, ::testing::ValuesIn(relay_cases()),
                         [](const ::testing::TestParamInfo<RelayCase>& i) { return i.param.name; });

// A hybrid's p2p step across nodes takes the node-aware forms as the p2p strategy's does: here it mixes transports
// (within a node one-sided, between nodes on nccl); global, reloaded and every rank's own plan, every element.
TEST(RelayedPlansChoice, HybridsP2pStepsMixTransportsAcrossNodes) {
  const Dims shape{1024, 1024};  // 4 MiB of f32: large enough for the mixed form to win
  for (const std::vector<int>& mesh : {std::vector<int>{2, 4}, std::vector<int>{4, 4}}) {
    const Layout src(Mesh(mesh), parse_placements("S0,S1"), shape), dst = src.with_placements(parse_placements("R,R"));
    SCOPED_TRACE(src.mesh().str());
    PlanOptions o;
    o.strategy = Strategy::kHybrid;
    o.topology.ranks_per_node = 2;
    const Plan plan = make_plan(src, dst, DType::kF32, o);
    ASSERT_EQ(plan.strategy(), Strategy::kHybrid);
    ASSERT_TRUE(std::any_of(plan.steps().begin(), plan.steps().end(), [](const Step& s) { return s.mixed; }))
        << plan_to_json(plan);
    EXPECT_EQ(run_plan(plan, testing::quick_host_run()).wrong_elements, 0);
    EXPECT_EQ(run_plan(plan_from_json(plan_to_json(plan)), testing::quick_host_run()).wrong_elements, 0);
    const RelayCase c{"hybrid", src, dst, 2};
    EXPECT_EQ(run_rank_plans(c, [&](int r) { return make_rank_plan(src, dst, DType::kF32, r, o); }), 0);
  }
}

TEST(RelayedPlansChoice, AutoTakesTheCheapestFormAndNeverOrOneNodeStaysFlat) {
  Layout src(Mesh({8}), parse_placements("S0"), Dims{4096, 4096});
  Layout dst = src.with_placements(parse_placements("R"));
  EXPECT_TRUE(make_plan(src, dst, DType::kBF16, relaying(2, Relay::kAuto)).steps().front().relayed);
  // Each form's estimate, from its plan loaded as a file (which prices it again): flat, relayed, mixed, both.
  auto estimate = [&](Relay relay, bool mixed) {
    return as_mixed(make_plan(src, dst, DType::kBF16, relaying(2, relay)), mixed).estimated_us();
  };
  const double forms[] = {estimate(Relay::kNever, false), estimate(Relay::kAlways, false),
                          estimate(Relay::kNever, true), estimate(Relay::kAlways, true)};
  PlanOptions o = relaying(2, Relay::kAuto);
  o.transport = Transport::kAuto;
  EXPECT_NEAR(make_plan(src, dst, DType::kBF16, o).estimated_us(),
              *std::min_element(std::begin(forms), std::end(forms)), 1e-6 * forms[0]);
  // Where NCCL within a node is as slow as between nodes (as under the two-node emulation, where NCCL runs on
  // sockets), the node's own traffic goes one-sided: the forwarding, and the direct transfers within a node.
  o.profile.intra_node = o.profile.inter_node;
  const Plan both = make_plan(src, dst, DType::kBF16, o);
  EXPECT_TRUE(both.steps().front().relayed && both.steps().front().mixed) << both.steps().front().relayed;
  o.relay = Relay::kNever;
  const Plan mixed = make_plan(src, dst, DType::kBF16, o);
  EXPECT_TRUE(mixed.steps().front().mixed && !mixed.steps().front().relayed);
  o.topology.peer_access = false;
  EXPECT_FALSE(make_plan(src, dst, DType::kBF16, o).steps().front().mixed);
  EXPECT_FALSE(make_plan(src, dst, DType::kBF16, relaying(2, Relay::kNever)).steps().front().relayed);
  EXPECT_FALSE(make_plan(src, dst, DType::kBF16, relaying(8, Relay::kAlways)).steps().front().relayed);
  // A converting plan relays nothing (its last step writes converted elements), even asked to.
  Layout small(Mesh({8}), parse_placements("S0"), Dims{32, 8});
  const Plan converting =
      make_converting_plan(small, small.with_placements(parse_placements("R")), DType::kBF16, DType::kF32, relaying(2));
  EXPECT_FALSE(converting.steps().front().relayed);
  EXPECT_EQ(run_plan(converting, testing::quick_host_run()).wrong_elements, 0);
}

TEST(RelayedPlansChoice, RefusedWhereTheyCannotRun) {
  Layout src(Mesh({8}), parse_placements("S0"), Dims{16, 8});
  Layout dst = src.with_placements(parse_placements("R"));
  const Plan plan = make_plan(src, dst, DType::kF32, relaying(2));
  ASSERT_TRUE(plan.steps().front().relayed);
  auto refused = [&](auto edit, const std::string& message) {
    nlohmann::json j = nlohmann::json::parse(plan_to_json(plan));
    edit(j);
    try {
      (void)plan_from_json(j.dump());
      ADD_FAILURE() << "accepted: " << message;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  auto first_relayed = [](nlohmann::json& j) -> nlohmann::json& {
    for (auto& t : j["steps"][0]["transfers"])
      if (t.contains("via")) return t;
    throw std::runtime_error("no relayed transfer");
  };
  refused([](nlohmann::json& j) { j["steps"][0].erase("relayed"); }, "in a step that does not relay");
  refused([&](nlohmann::json& j) { first_relayed(j)["via"] = first_relayed(j)["src"]; }, "which is not a third rank");
  refused([&](nlohmann::json& j) { first_relayed(j)["via"] = 99; }, "outside the mesh's world");
  refused([&](nlohmann::json& j) { j["steps"][0]["transport"] = "nvlink"; }, "on another node");
  // Via a rank that receives the region relayed itself (0 -> 5 goes via 4), not directly: refused before it could hang.
  refused(
      [&](nlohmann::json& j) {
        for (auto& t : j["steps"][0]["transfers"])
          if (t["src"] == 0 && t["dst"] == 3) t["via"] = 5;
      },
      "which does not receive");
  // Via another rank that does receive it directly, but not the one the rule picks: the ranks' plans would differ.
  refused(
      [&](nlohmann::json& j) {
        for (auto& t : j["steps"][0]["transfers"])
          if (t["src"] == 0 && t["dst"] == 3) t["via"] = 1;
      },
      "is not one the planner assigns");
  refused(
      [&](nlohmann::json& j) {
        j["steps"][0]["mixed"] = true;
        for (auto& t : j["steps"][0]["transfers"])
          if (t["src"] == 0 && t["dst"] == 1) t["transport"] = "nccl";
      },
      "but the step runs that transfer on nvlink");
  refused(
      [&](nlohmann::json& j) {
        for (auto& t : j["steps"][0]["transfers"])
          if (t["src"] == 0 && t["dst"] == 1) t["transport"] = "nvlink";
      },
      "but the step runs that transfer on nccl");
  EXPECT_THROW((void)with_conversion(plan, DType::kF16, relaying(2)), Error);
}

}  // namespace
}  // namespace reshard
