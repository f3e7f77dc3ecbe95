// Partial placements end to end on the host backend: every strategy over every pair of placements drawn from
// R, S(d) and one Partial op, on several meshes and sizes (0, 1, uneven), every element of every rank checked
// (exact for integers, within partial_tolerance for floats); PyTorch's partial cases from test_redistribute; the
// exact partition semantics; the p2p reduction's traffic; and refused plans.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>

#include "host_runs.hpp"
#include "placement_sets.hpp"
#include "reshard/executor.hpp"
#include "reshard/harness.hpp"
#include "reshard/host_backend.hpp"
#include "reshard/partial.hpp"
#include "reshard/pattern.hpp"
#include "reshard/plan_json.hpp"
#include "reshard/planner.hpp"
#include "test_plans.hpp"
#include "test_tier.hpp"

namespace reshard {
namespace {

RunOptions quick() { return testing::quick_host_run(); }

// Every assignment of R, S(0..nd-1) and P(op) to the mesh dims.
std::vector<std::vector<Placement>> placements_with(ReduceOp op, int mesh_ndim, int tensor_ndim) {
  std::vector<Placement> options{Placement::replicate(), Placement::partial(op)};
  for (int d = 0; d < tensor_ndim; ++d) options.push_back(Placement::shard(d));
  return testing::placement_lists(mesh_ndim, options);
}

struct PartialCase {
  std::vector<int> mesh;
  ReduceOp op;
  DType dtype;
};

class PartialExhaustive : public ::testing::TestWithParam<PartialCase> {};

TEST_P(PartialExhaustive, EveryPairEveryStrategyEveryElement) {
  const PartialCase& c = GetParam();
  Mesh mesh(c.mesh);
  auto all = placements_with(c.op, mesh.ndim(), 2);
  const long long stride = testing::tier_stride(static_cast<long long>(3 * all.size() * all.size()), 200, all.size());
  long long index = 0;  // fast tier: <= 200 pairs
  int runs = 0, p2p_runs = 0;
  for (const Dims& shape : {Dims{0, 3}, Dims{1, 1}, Dims{7, 5}}) {
    for (const auto& from : all) {
      for (const auto& to : all) {
        if (!testing::in_tier(index++, stride)) continue;
        bool any_partial = false;
        for (const Placement& p : from) any_partial = any_partial || p.is_partial();
        for (const Placement& p : to) any_partial = any_partial || p.is_partial();
        if (!any_partial) continue;  // covered by executor_host_test.cpp
        Layout src(mesh, from, shape), dst(mesh, to, shape);
        PlanOptions o;
        o.topology.ranks_per_node = (runs / 3) % 2 ? 2 : 8;  // nvlink where transfers stay on a node
        o.pipeline_chunk_bytes = runs % 3 == 0 ? 8 : 0;      // every third case pipelined in tiny chunks
        Plan automatic = make_plan(src, dst, c.dtype, o);
        for (const Candidate& cand : automatic.candidates()) {
          if (!cand.available) continue;
          o.strategy = cand.strategy;
          o.transport = cand.transport;
          Plan plan = make_plan(src, dst, c.dtype, o);
          RunResult r = run_plan(plan, quick());
          ASSERT_EQ(r.wrong_elements, 0) << src.str() << " -> [" << to_string(to) << "] " << to_string(cand.strategy)
                                         << ": " << r.first_error;
          Index expected = 0;
          for (int rank = 0; rank < mesh.size(); ++rank) expected += 3 * dst.local_volume(rank);
          ASSERT_EQ(r.checked_elements, expected);
          ++runs;
          p2p_runs += cand.strategy == Strategy::kP2P;
        }
      }
    }
  }
  EXPECT_GT(p2p_runs, 0);
  EXPECT_GT(runs, p2p_runs);
}

INSTANTIATE_TEST_SUITE_P(
    Partial, PartialExhaustive,
    ::testing::Values(PartialCase{{2}, ReduceOp::kSum, DType::kI32}, PartialCase{{3}, ReduceOp::kSum, DType::kF32},
                      PartialCase{{3}, ReduceOp::kAvg, DType::kI32}, PartialCase{{2}, ReduceOp::kMax, DType::kBF16},
                      PartialCase{{2}, ReduceOp::kMin, DType::kI8}, PartialCase{{2, 2}, ReduceOp::kSum, DType::kI32},
                      PartialCase{{2, 2}, ReduceOp::kSum, DType::kF16},
                      PartialCase{{2, 2}, ReduceOp::kAvg, DType::kF32},
                      PartialCase{{2, 2}, ReduceOp::kMax, DType::kI64},
                      PartialCase{{2, 3}, ReduceOp::kMin, DType::kF64}, PartialCase{{1, 2}, ReduceOp::kSum, DType::kU8},
                      // 3-D: a collective over all three dims is one step where two would be per dim (how a route
                      // through a kept Partial dim was found, below).
                      PartialCase{{2, 2, 2}, ReduceOp::kAvg, DType::kF32}),
    [](const ::testing::TestParamInfo<PartialCase>& p) {
      return testing::mesh_name(p.param.mesh) + "_" + std::string(to_string(p.param.op)) + "_" +
             std::string(to_string(p.param.dtype));
    });

// A mesh dim that is the same Partial in source and target keeps its contributions, as PyTorch's redistribute leaves
// them: no step of any strategy touches it. (The collective search once reduced it together with the others in one
// all_reduce over all three dims and partitioned it again: the same global value, other local shards. Found by
// fuzz_planner: 2x2x2 [P(avg),P(avg),P(avg)] -> [P(avg),R,S0].)
TEST(Partial, KeptPartialDimsAreNeverTouched) {
  const Mesh mesh({2, 2, 2});
  for (ReduceOp op : {ReduceOp::kAvg, ReduceOp::kSum})
    for (const char* pair : {"P,P,P>P,R,S0", "P,P,P>P,S0,R", "P,R,P>P,S0,S1", "S0,P,P>R,P,S1"}) {
      const std::string p(pair), name = std::string(to_string(op));
      auto with_op = [&](std::string text) {
        for (size_t at = text.find('P'); at != std::string::npos; at = text.find('P', at + 1))
          text.replace(at, 1, "P(" + name + ")"), at += name.size() + 2;
        return parse_placements(text);
      };
      const Layout src(mesh, with_op(p.substr(0, p.find('>'))), Dims{4, 6});
      const Layout dst(mesh, with_op(p.substr(p.find('>') + 1)), Dims{4, 6});
      const std::vector<int> kept = partial_roles(mesh, src.placements(), dst.placements()).kept;
      ASSERT_FALSE(kept.empty()) << pair;
      for (Strategy strategy : {Strategy::kCollective, Strategy::kP2P, Strategy::kHybrid}) {
        PlanOptions o;
        o.strategy = strategy;
        std::optional<Plan> made;
        try {
          made.emplace(make_plan(src, dst, DType::kF32, o));
        } catch (const Error&) {
          continue;  // no plan of this strategy (hybrids need two changing dims)
        }
        const Plan& plan = *made;
        for (const Step& step : plan.steps())
          for (int k : kept) {
            EXPECT_EQ(step.from[k], src.placement(k)) << pair << " " << to_string(strategy) << " " << name;
            EXPECT_EQ(step.to[k], src.placement(k)) << pair << " " << to_string(strategy) << " " << name;
          }
        const RunResult r = run_plan(plan, quick());
        EXPECT_EQ(r.wrong_elements, 0) << pair << " " << to_string(strategy) << " " << name << ": " << r.first_error;
      }
    }
}

// PyTorch's test_redistribute partial cases (P -> R, P -> S on uneven shapes, [P,P] -> [S0,S1] and mixes on 2x2
// and 4x2 meshes), every dtype, every strategy.
TEST(Partial, PyTorchRedistributeCases) {
  const testing::LayoutCase cases[] = {
      {{4}, "P", "R", {12, 3}},          {{4}, "P", "S0", {13, 3}},        {{4}, "P", "S1", {5, 11}},
      {{4}, "P(avg)", "S0", {9, 4}},     {{2, 2}, "P,P", "S0,S1", {8, 6}}, {{2, 2}, "P,P", "R,S0", {7, 5}},
      {{2, 2}, "P,S0", "S1,R", {5, 9}},  {{2, 2}, "S0,P", "R,S1", {6, 7}}, {{4, 2}, "P,P", "S0,S1", {16, 10}},
      {{4, 2}, "P,R", "S1,S0", {13, 9}}, {{4, 2}, "R,P", "S0,R", {9, 3}},  {{2, 2}, "R,R", "P,P", {4, 4}},
      {{4, 2}, "S0,S1", "P,R", {8, 8}},  {{2, 2}, "P,P", "P,S1", {6, 6}},  {{2, 2}, "P(max),P(max)", "S1,S0", {7, 3}},
  };
  for (const testing::LayoutCase& c : cases) {
    const Layout src = c.src(), dst = c.dst();
    for (DType t : kAllDTypes) {
      bool refused = false;  // fp8, bool, i16 (and complex64 max/min) cannot be Partial
      for (const Layout* l : {&src, &dst})
        for (const Placement& p : l->placements()) refused = refused || (p.is_partial() && !reducible(t, p.op()));
      if (refused) {
        EXPECT_THROW(make_plan(src, dst, t, {}), Error) << to_string(t);
        continue;
      }
      for (Strategy s : {Strategy::kAuto, Strategy::kCollective, Strategy::kP2P, Strategy::kHybrid}) {
        std::string why;
        const std::optional<Plan> plan = testing::plan_with(src, dst, t, s, why);
        if (!plan) {
          // Hybrid needs two changing mesh dims; 8-bit avg has no exact collective.
          EXPECT_TRUE(s == Strategy::kHybrid || s == Strategy::kCollective) << why;
          continue;
        }
        RunResult r = run_plan(*plan, quick());
        EXPECT_EQ(r.wrong_elements, 0) << src.str() << " -> " << c.to << " " << to_string(t) << " "
                                       << to_string(plan->strategy()) << ": " << r.first_error;
      }
    }
  }
}

// Runs a plan on the host backend and returns every rank's output tensor as raw bytes.
std::vector<std::vector<unsigned char>> outputs(const Plan& plan) {
  const int n = plan.src().mesh().size();
  std::vector<std::vector<unsigned char>> out(n);
  HostWorld world(n);
  run_ranks(
      n,
      [&](int r) {
        HostCommunicator comm(world, r);
        HostDevice device;
        Executor exec(plan, comm, device);
        std::vector<unsigned char> in(exec.input_bytes());
        fill_local(in.data(), plan.src(), r, plan.dtype());
        out[r].assign(exec.output_bytes(), 0xEE);
        exec.run({in.data(), in.size()}, {out[r].data(), out[r].size()}, nullptr);
        exec.wait(nullptr);
      },
      &world);
  return out;
}

// Replicate -> Partial(sum): floats divide by the group size (PyTorch's _partition_value), bit for bit; integers
// keep the value on coordinate 0 and zeros elsewhere; avg, max and min keep the value.
TEST(Partial, PartitionSemanticsAreExact) {
  Mesh mesh({3, 2});
  const Dims shape{5, 4};
  Layout src(mesh, parse_placements("R,R"), shape);
  for (const char* to : {"P,R", "R,P(avg)", "P(max),P(max)", "P,P", "S0,P"}) {
    Layout dst = src.with_placements(parse_placements(to));
    for (DType t : {DType::kF32, DType::kI32}) {
      for (Strategy s : {Strategy::kCollective, Strategy::kP2P}) {
        PlanOptions o;
        o.strategy = s;
        Plan plan = make_plan(src, dst, t, o);
        auto out = outputs(plan);
        const PartialRoles roles = partial_roles(mesh, src.placements(), dst.placements());
        for (int r = 0; r < mesh.size(); ++r) {
          const Partition part = partition_for(mesh, dst.placements(), roles.created, t, mesh.coord_of(r));
          const Box box = dst.box(r);
          Dims strides = row_major_strides(shape);
          for (Index i = 0; i < volume(box); ++i) {
            Index g = 0, rest = i;
            for (int d = box.ndim() - 1; d >= 0; --d) {
              g += (rest % box.shape[d] + box.offset[d]) * strides[d];
              rest /= box.shape[d];
            }
            const double v = pattern_value(g, t);
            if (t == DType::kF32) {
              float got;
              std::memcpy(&got, out[r].data() + 4 * i, 4);
              const float want =
                  part.divisor > 1 ? static_cast<float>(v) / static_cast<float>(part.divisor) : static_cast<float>(v);
              ASSERT_EQ(got, want) << to << " rank " << r << " element " << i;
            } else {
              std::int32_t got;
              std::memcpy(&got, out[r].data() + 4 * i, 4);
              ASSERT_EQ(got, part.zero ? 0 : static_cast<std::int32_t>(v)) << to << " rank " << r << " element " << i;
            }
          }
        }
      }
    }
  }
}

// P -> S by p2p moves exactly what a reduce-scatter moves, and no rank needs a full-size temporary.
TEST(Partial, P2PReductionMovesNoMoreThanReduceScatter) {
  for (int n : {2, 4, 8}) {
    Layout src(Mesh({n}), parse_placements("P"), Dims{1024, 512});
    Layout dst = src.with_placements(parse_placements("S0"));
    PlanOptions o;
    o.strategy = Strategy::kP2P;
    Plan p2p = make_plan(src, dst, DType::kF32, o);
    o.strategy = Strategy::kCollective;
    Plan coll = make_plan(src, dst, DType::kF32, o);
    ASSERT_EQ(coll.steps().front().kind, StepKind::kReduceScatter);
    const Index tensor = 1024 * 512 * 4;
    EXPECT_EQ(p2p.bytes_moved(), tensor / n * (n - 1) * n);  // each rank receives n-1 contributions of its shard
    EXPECT_EQ(p2p.bytes_moved(), coll.bytes_moved());
    EXPECT_LE(p2p.peak_workspace_bytes(), tensor / n * (n - 1));  // its received contributions, never the tensor
  }
}

TEST(Partial, RefusedPlansAndCorruptPartialSteps) {
  Mesh mesh({2, 2});
  Layout src(mesh, parse_placements("P,P(max)"), Dims{4, 4});
  EXPECT_THROW(make_plan(src, src.with_placements(parse_placements("R,R")), DType::kF32), Error);
  // A p2p step missing one contribution, and one that sends a kept contribution across coordinates.
  Layout p(mesh, parse_placements("P,R"), Dims{4, 4});
  PlanOptions o;
  o.strategy = Strategy::kP2P;
  Plan good = make_plan(p, p.with_placements(parse_placements("S0,R")), DType::kF32, o);
  PlanSpec spec = good.spec();
  spec.steps[0].transfers.pop_back();
  EXPECT_THROW(Plan{spec}, Error);
  Layout kept(mesh, parse_placements("P,S0"), Dims{4, 4});
  Plan k = make_plan(kept, kept.with_placements(parse_placements("P,S1")), DType::kF32, o);
  PlanSpec bad = k.spec();
  for (Transfer& t : bad.steps[0].transfers)
    if (!t.is_local()) {
      t.src ^= 2;  // the same block on the other coordinate of the kept Partial dim
      break;
    }
  try {
    Plan{bad};
    ADD_FAILURE() << "a kept contribution moved across coordinates";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("step 0 (p2p)"), std::string::npos) << e.what();
  }
  // Plans with Partial round-trip through JSON and still run.
  Plan reloaded = plan_from_json(plan_to_json(good));
  EXPECT_EQ(run_plan(reloaded, quick()).wrong_elements, 0);
}

}  // namespace
}  // namespace reshard
