// The fast planner (p2p steps priced by transfer classes, collective scratch by rank classes) against the reference
// planner (every transfer and every rank visited): identical plans, byte for byte in their JSON, global and per rank,
// on random redistributions: meshes up to 4-D (some with explicit rank orders), uneven and nested shards, Partial
// sources and targets, several node sizes, transports, memory budgets and pipeline chunks.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "placement_sets.hpp"
#include "random_plan_requests.hpp"
#include "reshard/plan_json.hpp"
#include "reshard/planner.hpp"
#include "search/planner_reference.hpp"
#include "test_plans.hpp"
#include "test_tier.hpp"

namespace reshard {
namespace {

// The plan's JSON, or the error it raised (both planners must raise the same one).
using testing::outcome;

// The sanitizer build (ASan + UBSan at -O1, about 20x slower here) runs a sample; the release build runs all 10,000.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif
constexpr int kCases = kSanitized ? 400 : 10000;

TEST(PlannerEquivalence, FastAndReferencePlansAreIdentical) {
  std::mt19937 rng(20261123);
  int class_priced = 0;  // cases whose source is sharded on every mesh dim of size > 1 (the class path)
  for (int i = 0; i < kCases; ++i) {
    const testing::PlanRequest request = testing::random_plan_request(rng, i, testing::RequestRanges{});
    const Layout &src = request.src, &dst = request.dst;
    const Mesh& mesh = src.mesh();
    const std::vector<int>& mesh_shape = mesh.shape();
    const DType dtype = request.dtype;
    const PlanOptions& o = request.options;
    const int rank = request.rank;
    bool sharded = true;
    for (int k = 0; k < mesh.ndim(); ++k) sharded = sharded && !(src.placement(k).is_replicate() && mesh_shape[k] > 1);
    class_priced += sharded;
    const std::string what = "case " + std::to_string(i) + ": " + src.str() + " -> [" + to_string(dst.placements()) +
                             "] " + std::string(to_string(o.strategy));
    ASSERT_EQ(outcome([&] { return make_plan(src, dst, dtype, o); }),
              outcome([&] { return detail::make_plan_reference(src, dst, dtype, o); }))
        << what;
    if (i % 3 != 0) continue;  // rank plans (priced as the global one, p2p transfers of one rank) on a third
    ASSERT_EQ(outcome([&] { return make_rank_plan(src, dst, dtype, rank, o); }),
              outcome([&] { return detail::make_plan_reference(src, dst, dtype, o, rank); }))
        << what << " rank " << rank;
  }
  EXPECT_GT(class_priced, kCases / 5);
}

// Larger meshes than the random cases reach (many nodes, many transfer classes per rank), uneven extents, Partial.
TEST(PlannerEquivalence, LargerMeshes) {
  struct Case {
    testing::LayoutCase layout;
    int ranks_per_node;
  };
  const Case cases[] = {
      {{{8, 16}, "S0,S0", "S1,S1", Dims{1000, 999}}, 8},        {{{8, 16}, "S0,S1", "S1,S0", Dims{130, 77}}, 4},
      {{{4, 4, 8}, "S0,S1,S0", "S1,S0,R", Dims{97, 64, 5}}, 8}, {{{8, 16}, "P,S1", "S0,S1", Dims{300, 301}}, 8},
      {{{4, 32}, "S1,P(max)", "R,S0", Dims{64, 100}}, 16},      {{{16, 8}, "S0,S0", "S1,S1", Dims{7, 200}}, 3},
  };
  for (const Case& c : cases) {
    const Layout src = c.layout.src(), dst = c.layout.dst();
    PlanOptions o;
    o.topology.ranks_per_node = c.ranks_per_node;
    for (Strategy s : {Strategy::kAuto, Strategy::kP2P}) {
      if (kSanitized && s != Strategy::kAuto) continue;  // auto prices p2p too
      o.strategy = s;
      ASSERT_EQ(outcome([&] { return make_plan(src, dst, DType::kBF16, o); }),
                outcome([&] { return detail::make_plan_reference(src, dst, DType::kBF16, o); }))
          << src.str() << " -> [" << c.layout.to << "]";
      ASSERT_EQ(outcome([&] { return make_rank_plan(src, dst, DType::kBF16, 5, o); }),
                outcome([&] { return detail::make_plan_reference(src, dst, DType::kBF16, o, 5); }))
          << src.str() << " -> [" << c.layout.to << "]";
    }
  }
}

// _StridedShard layouts that stay one box per rank (FSDP2 + TP and variants), to and from every R/S0/S1 layout.
TEST(PlannerEquivalence, StridedShardLayouts) {
  struct Case {
    std::vector<int> mesh;
    const char* strided;
    Dims shape;
  };
  const Case cases[] = {{{2, 2}, "SS0/2,S0", Dims{8, 6}},
                        {{2, 2}, "SS0/2,S0", Dims{7, 3}},
                        {{2, 4}, "SS0/4,S0", Dims{16, 3}},
                        {{3, 2}, "SS1/2,S1", Dims{2, 7}},
                        {{2, 2, 2}, "R,SS0/2,S0", Dims{8, 3}}};
  int compared = 0;
  for (const Case& c : cases) {
    const Mesh mesh(c.mesh);
    const Layout strided(mesh, parse_placements(c.strided), c.shape);
    ASSERT_TRUE(strided.one_box_per_rank()) << strided.str();
    for (const auto& other : testing::all_placements(mesh.ndim(), 2)) {
      const Layout plain(mesh, other, c.shape);
      for (const auto& [src, dst] : {std::pair{strided, plain}, std::pair{plain, strided}}) {
        PlanOptions o;
        o.topology.ranks_per_node = compared % 2 ? 2 : 8;
        ASSERT_EQ(outcome([&] { return make_plan(src, dst, DType::kF32, o); }),
                  outcome([&] { return detail::make_plan_reference(src, dst, DType::kF32, o); }))
            << src.str() << " -> [" << to_string(dst.placements()) << "]";
        ASSERT_EQ(outcome([&] { return make_rank_plan(src, dst, DType::kF32, 1, o); }),
                  outcome([&] { return detail::make_plan_reference(src, dst, DType::kF32, o, 1); }))
            << src.str() << " -> [" << to_string(dst.placements()) << "]";
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 100);
}

}  // namespace
}  // namespace reshard

namespace reshard {
namespace {

// Plan validation finds a repeated pair of ranks and a block received twice by sorting (not a tree): the first
// offending transfer is named, as before.
std::string validation_error(const PlanSpec& spec) {
  try {
    validate_plan(spec);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(PlanValidation, RepeatedPairAndBlockAreNamed) {
  const Mesh mesh({4});
  PlanOptions o;
  o.strategy = Strategy::kP2P;
  {
    const Layout src(mesh, parse_placements("S0"), Dims{8, 8}), dst(mesh, parse_placements("S1"), Dims{8, 8});
    PlanSpec spec = make_plan(src, dst, DType::kF32, o).spec();
    std::vector<Transfer>& t = spec.steps[0].transfers;
    ASSERT_EQ(validation_error(spec), "");
    t.insert(t.begin() + 5, t[2]);  // a second transfer 2 -> ... at position 5
    EXPECT_NE(validation_error(spec).find("transfer 5 (rank " + std::to_string(t[2].src) + " -> " +
                                          std::to_string(t[2].dst) + "): rank " + std::to_string(t[2].src) +
                                          " sends to rank " + std::to_string(t[2].dst) + " twice in one step"),
              std::string::npos)
        << validation_error(spec);
  }
  {
    // Replicated source: rank 1 receiving its block from both replicas holding it.
    const Layout src(Mesh({2, 2}), parse_placements("R,S0"), Dims{8, 8}),
        dst(Mesh({2, 2}), parse_placements("S0,S1"), Dims{8, 8});
    PlanSpec spec = make_plan(src, dst, DType::kF32, o).spec();
    std::vector<Transfer>& t = spec.steps[0].transfers;
    ASSERT_EQ(validation_error(spec), "");
    auto it = std::find_if(t.begin(), t.end(), [](const Transfer& x) { return x.dst == 1 && x.src != 1; });
    ASSERT_NE(it, t.end());
    Transfer twin = *it;
    for (int q = 0; q < 4; ++q)  // the block's other holder
      if (q != it->src && src.box(q) == src.box(it->src)) twin.src = q;
    ASSERT_NE(twin.src, it->src);
    t.push_back(twin);
    EXPECT_NE(validation_error(spec).find("rank 1 receives block"), std::string::npos) << validation_error(spec);
  }
}

}  // namespace
}  // namespace reshard
