// The dtypes that move as bytes (fp8 e4m3fn/e5m2, bool, i16, complex64) and _StridedShard layouts on the host
// backend: every placement pair on small meshes, every strategy, every element of every rank checked (harness
// protocol: two poisoned runs and a final one); complex64 Partial sum/avg; refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <optional>
#include <set>

#include "host_runs.hpp"
#include "placement_sets.hpp"
#include "reshard/detail/half.hpp"
#include "reshard/detail/pattern_bits.hpp"
#include "reshard/harness.hpp"
#include "reshard/pattern.hpp"
#include "reshard/plan_json.hpp"
#include "reshard/planner.hpp"
#include "test_plans.hpp"
#include "test_tier.hpp"

namespace reshard {
namespace {

constexpr DType kByteDTypes[] = {DType::kF8E4M3, DType::kF8E5M2, DType::kBool, DType::kI16, DType::kC64};
constexpr Strategy kStrategies[] = {Strategy::kCollective, Strategy::kP2P, Strategy::kHybrid, Strategy::kAuto};


using testing::all_placements;

// Plans src -> dst with strategy s and runs it; returns the number of wrong elements, or nullopt when the strategy
// has no plan (hybrid needs two changing mesh dims).
std::optional<Index> run(const Layout& src, const Layout& dst, DType t, Strategy s) {
  std::string why;
  const std::optional<Plan> plan = testing::plan_with(src, dst, t, s, why);
  if (!plan) {
    EXPECT_NE(s, Strategy::kAuto) << src.str() << " -> " << to_string(dst.placements()) << ": " << why;
    EXPECT_NE(s, Strategy::kP2P) << src.str() << " -> " << to_string(dst.placements()) << ": " << why;
    return std::nullopt;
  }
  const RunResult r = run_plan(*plan, testing::quick_host_run());
  EXPECT_EQ(r.checked_elements > 0, dst.global_volume() > 0);
  return r.wrong_elements;
}

// The pattern gives every new dtype valid encodings that vary from element to element.
TEST(ByteDTypes, PatternIsValidAndVaries) {
  const Dims shape{4096};
  for (DType t : kByteDTypes) {
    std::vector<unsigned char> data(4096 * element_size(t));
    fill_pattern(data.data(), whole(shape), shape, t);
    std::set<std::uint64_t> distinct;  // each element's bytes (at most 8) as one number
    for (Index i = 0; i < 4096; ++i) {
      const unsigned char* e = data.data() + i * element_size(t);
      std::uint64_t bits = 0;
      std::memcpy(&bits, e, element_size(t));
      distinct.insert(bits);
      switch (t) {
        case DType::kF8E4M3:
          ASSERT_FALSE(std::isnan(detail::f8e4m3_to_float(e[0]))) << i;
          break;
        case DType::kF8E5M2:
          ASSERT_TRUE(std::isfinite(detail::f8e5m2_to_float(e[0]))) << i;
          break;
        case DType::kBool:
          ASSERT_LE(e[0], 1) << i;
          break;
        case DType::kC64: {
          float part[2];
          std::memcpy(part, e, 8);
          for (int lane = 0; lane < 2; ++lane)
            ASSERT_EQ(part[lane], static_cast<float>(detail::pattern_int(i, t, lane))) << i;
          break;
        }
        default:
          break;
      }
    }
    // 1-byte types use (nearly) their whole range; i16 (65535 values: ~130 birthday repeats in 4096) and c64 rarely
    // repeat; bool has both values.
    const size_t want = t == DType::kBool ? 2 : element_size(t) == 1 ? 240 : t == DType::kI16 ? 3800 : 4000;
    EXPECT_GE(distinct.size(), want) << to_string(t);
    // A wrong element is caught: swapping two differing elements gives two mismatches.
    std::vector<unsigned char> swapped = data;
    const int es = element_size(t);
    Index j = 1;
    while (std::memcmp(data.data(), data.data() + j * es, es) == 0) ++j;
    std::memcpy(swapped.data(), data.data() + j * es, es);
    std::memcpy(swapped.data() + j * es, data.data(), es);
    EXPECT_EQ(count_mismatches(data.data(), whole(shape), shape, t), 0) << to_string(t);
    EXPECT_EQ(count_mismatches(swapped.data(), whole(shape), shape, t), 2) << to_string(t);
  }
}

// Every pair of R/S0/S1 placements on meshes (2), (3), (2,2), sizes uneven, 0 and 1, every strategy.
TEST(ByteDTypes, EveryPlacementPairEveryStrategyEveryElement) {
  int runs = 0;
  const long long stride = testing::sanitizer_stride(std::size(kByteDTypes));
  long long index = 0;
  for (const std::vector<int>& m : {std::vector<int>{2}, std::vector<int>{3}, std::vector<int>{2, 2}}) {
    const Mesh mesh(m);
    const auto placements = all_placements(mesh.ndim(), 2);
    for (const Dims& shape : {Dims{7, 5}, Dims{0, 3}, Dims{1, 1}}) {
      for (const auto& from : placements) {
        for (const auto& to : placements) {
          const Layout src(mesh, from, shape), dst(mesh, to, shape);
          for (DType t : kByteDTypes) {
            if (!testing::in_tier(index++, stride)) continue;
            for (Strategy s : {Strategy::kCollective, Strategy::kP2P, Strategy::kHybrid}) {  // auto picks one
              if (std::optional<Index> wrong = run(src, dst, t, s)) {
                ++runs;
                ASSERT_EQ(*wrong, 0) << src.str() << " -> [" << to_string(to) << "] " << to_string(t) << " "
                                     << to_string(s);
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(runs, 2000 / stride);
}

// complex64 reduces as pairs of f32 (PyTorch allows Partial sum and avg on it): reduction, reduce_scatter and the
// partition of a replicated value, every strategy; max and min are refused.
TEST(ByteDTypes, Complex64PartialSumAndAvg) {
  const testing::LayoutCase cases[] = {
      {{4}, "P", "R", {6, 3}},
      {{4}, "P", "S0", {7, 3}},
      {{3}, "P(avg)", "S1", {5, 4}},
      {{2, 2}, "P,P", "S0,S1", {6, 5}},
      {{2, 2}, "P(avg),S0", "S1,R", {5, 3}},
      {{2, 2}, "R,R", "P,S0", {4, 4}},
      {{2, 2}, "S0,P", "R,S1", {6, 7}},
      {{2}, "R", "P(avg)", {3, 3}},
  };
  int runs = 0;
  for (const testing::LayoutCase& c : cases) {
    const Layout src = c.src(), dst = c.dst();
    for (Strategy s : kStrategies) {
      if (std::optional<Index> wrong = run(src, dst, DType::kC64, s)) {
        ++runs;
        EXPECT_EQ(*wrong, 0) << src.str() << " -> " << c.to << " " << to_string(s);
      }
    }
  }
  EXPECT_GT(runs, 20);
}

TEST(ByteDTypes, PartialRefusedWithTheDTypeAndOp) {
  const Layout src(Mesh({2}), parse_placements("P"), Dims{4});
  const Layout dst = src.with_placements(parse_placements("R"));
  for (DType t : {DType::kF8E4M3, DType::kF8E5M2, DType::kBool, DType::kI16}) {
    try {
      make_plan(src, dst, t, {});
      ADD_FAILURE() << to_string(t) << " planned";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(cat("Partial(sum) is not supported on ", to_string(t))), std::string::npos)
          << e.what();
    }
  }
  const Layout cmax = src.with_placements(parse_placements("P(max)"));
  EXPECT_THROW(make_plan(cmax, dst, DType::kC64, {}), Error);
  // Creating a Partial is refused too, and so is a loaded plan that edits the dtype.
  EXPECT_THROW(make_plan(dst, src, DType::kBool, {}), Error);
  std::string json = plan_to_json(make_plan(src, dst, DType::kI32, {}));
  const size_t at = json.find("\"i32\"");
  ASSERT_NE(at, std::string::npos);
  json.replace(at, 5, "\"i16\"");
  EXPECT_THROW(plan_from_json(json), Error);
}

// ---- _StridedShard -----------------------------------------------------------------------------------------------

// FSDP2 + TP's (_StridedShard(0, split_factor=tp), Shard(0)) and its HSDP and dim-1 variants, even and uneven
// extents that stay one box per rank, to and from every R/S0/S1 layout, every strategy.
TEST(StridedShard, OneBoxLayoutsEveryPairEveryStrategyEveryElement) {
  struct Case {
    std::vector<int> mesh;
    const char* strided;
    std::vector<Dims> shapes;
  };
  const Case cases[] = {
      {{2, 2}, "SS0/2,S0", {{8, 6}, {7, 3}, {5, 2}, {3, 4}}},
      {{2, 4}, "SS0/4,S0", {{16, 3}, {8, 2}}},
      {{3, 2}, "SS1/2,S1", {{4, 12}, {2, 7}}},
      {{2, 2, 2}, "R,SS0/2,S0", {{8, 3}}},
  };
  int runs = 0;
  const long long stride = testing::sanitizer_stride(2);
  long long index = 0;
  for (const Case& c : cases) {
    const Mesh mesh(c.mesh);
    for (const Dims& shape : c.shapes) {
      const Layout strided(mesh, parse_placements(c.strided), shape);
      ASSERT_TRUE(strided.one_box_per_rank()) << strided.str();
      for (const auto& other : all_placements(mesh.ndim(), 2)) {
        const Layout plain(mesh, other, shape);
        for (const auto& [src, dst] : {std::pair{strided, plain}, std::pair{plain, strided}}) {
          if (!testing::in_tier(index++, stride)) continue;
          for (Strategy s : kStrategies) {
            if (std::optional<Index> wrong = run(src, dst, DType::kF32, s)) {
              ++runs;
              ASSERT_EQ(*wrong, 0) << src.str() << " -> [" << to_string(dst.placements()) << "] " << to_string(s);
            }
          }
        }
      }
    }
  }
  EXPECT_GT(runs, 300 / stride);
}

// The FSDP2 + TP gather to a full replica goes through collectives only: one all_gather over both mesh dims
// (flattened), whose chunks arrive in rank order and are put in place by rows.
TEST(StridedShard, FsdpTpToReplicateIsOneAllGather) {
  const Layout src(Mesh({2, 2}), parse_placements("(_StridedShard(dim=0, split_factor=2), Shard(dim=0))"), Dims{8, 4});
  PlanOptions o;
  o.strategy = Strategy::kCollective;
  const Plan plan = make_plan(src, src.with_placements(parse_placements("R,R")), DType::kBF16, o);
  ASSERT_EQ(plan.steps().size(), 1u);
  EXPECT_EQ(plan.steps()[0].kind, StepKind::kAllGather);
  EXPECT_EQ(plan.steps()[0].mesh_dims, (std::vector<int>{0, 1}));
  EXPECT_EQ(run_plan(plan, testing::quick_host_run()).wrong_elements, 0);
  // And the plan survives JSON (placements print as SS0/2).
  EXPECT_NE(plan_to_json(plan).find("SS0/2"), std::string::npos);
  EXPECT_EQ(run_plan(plan_from_json(plan_to_json(plan)), testing::quick_host_run()).wrong_elements, 0);
}

TEST(StridedShard, LayoutsThatAreNotBoxesAreRefusedWhenPlanned) {
  for (const auto& [mesh, ps, shape] :
       {std::tuple{std::vector<int>{2}, "SS0/2", Dims{8}}, std::tuple{std::vector<int>{2, 2}, "SS0/3,S0", Dims{12, 2}},
        std::tuple{std::vector<int>{2, 2}, "S0,SS0/2", Dims{8}}}) {
    const Layout strided(Mesh(mesh), parse_placements(ps), shape);
    ASSERT_FALSE(strided.one_box_per_rank()) << strided.str();
    const Layout plain = strided.with_placements(std::vector<Placement>(mesh.size(), Placement::replicate()));
    for (const auto& [src, dst] : {std::pair{strided, plain}, std::pair{plain, strided}}) {
      try {
        make_plan(src, dst, DType::kF32, {});
        ADD_FAILURE() << src.str() << " -> " << to_string(dst.placements()) << " planned";
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
        EXPECT_NE(std::string(e.what()).find("not one box"), std::string::npos) << e.what();
      }
    }
  }
}

}  // namespace
}  // namespace reshard
