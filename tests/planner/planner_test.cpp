// Planner: every strategy's plan, executed by the reference simulator, yields every rank's target tensor exactly;
// p2p moves the minimum bytes; global and per-rank plans agree.
#include <gtest/gtest.h>

#include <random>

#include "placement_sets.hpp"
#include "reshard/plan_json.hpp"
#include "reshard/planner.hpp"
#include "reshard/profile.hpp"
#include "simulator.hpp"
#include "test_tier.hpp"

namespace reshard {
namespace {

using testing::count_wrong;
using testing::distribute;
using testing::minimum_bytes;
using testing::simulate;

using testing::all_placements;

std::vector<Dims> shapes_for(int nd) {
  switch (nd) {
    case 1:
      return {{0}, {1}, {5}, {8}, {13}};
    case 2:
      return {{0, 3}, {1, 1}, {5, 3}, {8, 8}, {7, 10}};
    default:
      return {{2, 0, 3}, {1, 5, 2}, {4, 4, 4}, {5, 3, 7}};
  }
}

// Plans with every strategy and checks each plan in the simulator. Returns a description of the first failure.
std::string check_pair(const Layout& src, const Layout& dst, DType dtype, const Topology& topology,
                       const PlanOptions& base = {}) {
  PlanOptions options = base;
  options.topology = topology;
  std::string where = cat(src.str(), " -> [", to_string(dst.placements()), "]: ");
  Plan automatic = make_plan(src, dst, dtype, options);
  for (Strategy s : {Strategy::kAuto, Strategy::kCollective, Strategy::kP2P, Strategy::kHybrid}) {
    options.strategy = s;
    const Candidate* cand = nullptr;  // the strategy on its best transport (nvlink is unavailable across nodes)
    for (const Candidate& c : automatic.candidates())
      if (c.strategy == s && (!cand || (!cand->available && c.available))) cand = &c;
    if (s != Strategy::kAuto && !cand->available) {
      if (s != Strategy::kHybrid) return where + cat(to_string(s), " unavailable: ", cand->reason);
      continue;
    }
    Plan plan = s == Strategy::kAuto ? automatic : make_plan(src, dst, dtype, options);
    if (s != Strategy::kAuto && plan.strategy() != s) return where + "wrong strategy";
    std::string err;
    try {
      std::vector<testing::Tensor> out = simulate(plan, distribute(src));
      if (count_wrong(dst, out, &err) != 0) return where + cat(to_string(s), ": ", err);
    } catch (const std::exception& e) {
      return where + cat(to_string(s), ": ", e.what());
    }
    if (s == Strategy::kP2P && plan.bytes_moved() != minimum_bytes(src, dst, element_size(dtype)))
      return where +
             cat("p2p moved ", plan.bytes_moved(), " bytes, minimum ", minimum_bytes(src, dst, element_size(dtype)));
    if (s == Strategy::kAuto) {
      for (const Candidate& c : plan.candidates())
        if (c.available && c.estimated_us < plan.estimated_us()) return where + "auto did not pick the cheapest";
    }
  }
  return "";
}

using testing::MeshCase;

class PlannerExhaustive : public ::testing::TestWithParam<MeshCase> {};

TEST_P(PlannerExhaustive, EveryPairEveryShapeEveryStrategy) {
  const MeshCase& mc = GetParam();
  Mesh mesh(mc.mesh);
  auto placements = all_placements(mesh.ndim(), mc.tensor_ndim);
  const long long pairs =
      static_cast<long long>(shapes_for(mc.tensor_ndim).size() * placements.size() * placements.size());
  const long long stride = testing::tier_stride(pairs, 600, placements.size());  // fast tier: <= 600 pairs
  long long index = 0;
  int checked = 0;
  for (const Dims& shape : shapes_for(mc.tensor_ndim)) {
    for (const auto& from : placements) {
      for (const auto& to : placements) {
        if (!testing::in_tier(index++, stride)) continue;
        Layout src(mesh, from, shape), dst(mesh, to, shape);
        std::string err = check_pair(src, dst, DType::kF32, Topology{2});
        ASSERT_EQ(err, "");
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 0);
}

INSTANTIATE_TEST_SUITE_P(Meshes, PlannerExhaustive,
                         ::testing::Values(MeshCase{{2}, 1}, MeshCase{{2}, 2}, MeshCase{{2}, 3}, MeshCase{{3}, 1},
                                           MeshCase{{3}, 2}, MeshCase{{3}, 3}, MeshCase{{2, 2}, 1}, MeshCase{{2, 2}, 2},
                                           MeshCase{{2, 2}, 3}, MeshCase{{2, 3}, 1}, MeshCase{{2, 3}, 2},
                                           MeshCase{{2, 3}, 3}, MeshCase{{2, 2, 2}, 1}, MeshCase{{2, 2, 2}, 2},
                                           MeshCase{{2, 2, 2}, 3}, MeshCase{{4, 2}, 1}, MeshCase{{4, 2}, 2},
                                           MeshCase{{4, 2}, 3}),
                         [](const ::testing::TestParamInfo<MeshCase>& p) { return testing::mesh_case_name(p.param); });

TEST(PlannerRandom, TenThousandRandomCases) {
  std::mt19937 rng(20261122);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int i = 0; i < 10000; ++i) {
    std::vector<int> mesh_shape(pick(1, 3));
    for (int& m : mesh_shape) m = pick(1, 4);
    int nd = pick(1, 3);
    Dims shape(nd);
    for (int d = 0; d < nd; ++d) shape[d] = pick(0, 9);
    Mesh mesh(mesh_shape);
    auto random_placements = [&] {
      std::vector<Placement> ps;
      for (size_t k = 0; k < mesh_shape.size(); ++k) {
        int c = pick(0, nd);
        ps.push_back(c == 0 ? Placement::replicate() : Placement::shard(pick(0, 1) ? c - 1 : c - 1 - nd));
      }
      return ps;
    };
    Layout src(mesh, random_placements(), shape), dst(mesh, random_placements(), shape);
    const int ranks_per_node = pick(1, 4);
    if (!testing::in_tier(i, testing::full_tier() ? 1 : 3)) continue;  // fast tier: every third case
    ASSERT_EQ(check_pair(src, dst, kAllDTypes[i % 8], Topology{ranks_per_node}), "") << "case " << i;
  }
}

// The committed calibrated profiles (bench/profiles/h200x2.json, h100x2.json) drive the same checks.
class PlannerCalibrated : public ::testing::TestWithParam<const char*> {};
INSTANTIATE_TEST_SUITE_P(Profiles, PlannerCalibrated, ::testing::Values("h200x2.json", "h100x2.json"),
                         [](const auto& param_info) {  // the profile's file name without .json: "h200x2"
                           std::string name = param_info.param;
                           return name.substr(0, name.find('.'));
                         });

TEST_P(PlannerCalibrated, EveryPairWithTheCalibratedProfile) {
  PlanOptions base;
  std::string path = RESHARD_PROFILE_DIR;
  path.append("/").append(GetParam());
  base.profile = load_profile(path);
  for (const std::vector<int>& m : {std::vector<int>{2}, {3}, {2, 2}, {2, 3}, {4, 2}}) {
    Mesh mesh(m);
    for (int nd = 1; nd <= 2; ++nd) {
      auto placements = all_placements(mesh.ndim(), nd);
      for (const Dims& shape : shapes_for(nd))
        for (const auto& from : placements)
          for (const auto& to : placements)
            ASSERT_EQ(check_pair(Layout(mesh, from, shape), Layout(mesh, to, shape), DType::kBF16, Topology{2}, base),
                      "");
    }
  }
}

TEST(PlannerInput, LayoutsMustShareMeshAndShape) {
  Layout a(Mesh({2, 2}), parse_placements("S0,R"), Dims{8, 8});
  Layout b(Mesh({4}, {4, 5, 6, 7}, 8), parse_placements("S0"), Dims{8, 8});  // another world (meshes may differ)
  Layout c(Mesh({2, 2}), parse_placements("S0,R"), Dims{8, 9});
  auto expect = [](const Layout& x, const Layout& y, const std::string& needle) {
    try {
      make_plan(x, y, DType::kF32, {});
      ADD_FAILURE() << "planned across different layouts";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect(a, b, "source mesh 2x2 and target mesh 4[4,5,6,7]/8 are in worlds of different sizes (4 and 8 ranks)");
  expect(a, c, "source shape 8x8 and target shape 8x9 differ");
  PlanOptions o;
  o.memory_budget_bytes = -1;
  EXPECT_THROW(make_plan(a, a, DType::kF32, o), Error);
  o.memory_budget_bytes.reset();
  o.topology.ranks_per_node = 0;
  EXPECT_THROW(make_plan(a, a, DType::kF32, o), Error);
  EXPECT_THROW(make_rank_plan(a, a, DType::kF32, 4, {}), Error);
  Layout huge(Mesh({2}), parse_placements("S0"), Dims{Index(1) << 59, 4});  // 2^61 elements fit, 2^64 bytes do not
  EXPECT_THROW(make_plan(huge, huge, DType::kF64, {}), Error);              // bytes overflow int64
}

TEST(PlannerScale, RankPlansMatchTheGlobalPlan) {
  for (auto [from, to] : {std::pair{"S0,S1", "S1,S0"}, std::pair{"S0,S0", "S1,S1"}, std::pair{"R,S0", "S1,R"}}) {
    Layout src(Mesh({4, 4}), parse_placements(from), Dims{37, 41});
    Layout dst(Mesh({4, 4}), parse_placements(to), Dims{37, 41});
    for (Strategy s : {Strategy::kP2P, Strategy::kAuto, Strategy::kCollective}) {
      PlanOptions o;
      o.strategy = s;
      o.topology.ranks_per_node = 4;
      Plan global = make_plan(src, dst, DType::kBF16, o);
      for (int r = 0; r < 16; ++r) {
        Plan mine = make_rank_plan(src, dst, DType::kBF16, r, o);
        ASSERT_EQ(mine.strategy(), global.strategy());
        ASSERT_EQ(mine.steps().size(), global.steps().size());
        EXPECT_DOUBLE_EQ(mine.estimated_us(), global.estimated_us());
        EXPECT_EQ(mine.peak_workspace_bytes(), global.peak_workspace_bytes());
        for (size_t i = 0; i < global.steps().size(); ++i) {
          std::vector<Transfer> expected;
          for (const Transfer& t : global.steps()[i].transfers)
            if (t.src == r || t.dst == r) expected.push_back(t);
          auto sorted = [](std::vector<Transfer> v) {
            std::sort(v.begin(), v.end(), [](const Transfer& a, const Transfer& b) {
              return std::tie(a.src, a.dst) < std::tie(b.src, b.dst);
            });
            return v;
          };
          EXPECT_EQ(sorted(mine.steps()[i].transfers), sorted(expected)) << "rank " << r << " step " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace reshard

namespace reshard {
namespace {

// Random layouts with Partial placements (one reduce op per layout): every available strategy's plan passes the
// reference simulator (contributions reduced exactly once, kept contributions separate, partitions per
// partial.hpp), and the p2p candidate always exists.
TEST(PlannerRandom, ThreeThousandRandomPartialCases) {
  std::mt19937 rng(20261123);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int partial_p2p = 0;
  for (int i = 0; i < 3000; ++i) {
    std::vector<int> mesh_shape(pick(1, 3));
    for (int& m : mesh_shape) m = pick(1, 3);
    int nd = pick(1, 3);
    Dims shape(nd);
    for (int d = 0; d < nd; ++d) shape[d] = pick(0, 7);
    Mesh mesh(mesh_shape);
    auto random_placements = [&] {
      std::vector<Placement> ps;
      const auto op = static_cast<ReduceOp>(pick(0, 3));
      for (size_t k = 0; k < mesh_shape.size(); ++k) {
        int c = pick(0, nd + 1);
        ps.push_back(c == 0 ? Placement::replicate() : c == nd + 1 ? Placement::partial(op) : Placement::shard(c - 1));
      }
      return ps;
    };
    Layout src(mesh, random_placements(), shape), dst(mesh, random_placements(), shape);
    const DType dtype = kAllDTypes[i % 8];
    PlanOptions o;
    o.topology.ranks_per_node = pick(1, 4);
    Plan automatic = make_plan(src, dst, dtype, o);
    for (const Candidate& c : automatic.candidates()) {
      if (!c.available) {  // p2p is always available on nccl (nvlink not across nodes)
        ASSERT_TRUE(c.strategy != Strategy::kP2P || c.transport == Transport::kNvlink)
            << "case " << i << ": " << c.reason;
        continue;
      }
      o.strategy = c.strategy;
      o.transport = c.transport;
      Plan plan = make_plan(src, dst, dtype, o);
      std::string err;
      try {
        ASSERT_EQ(testing::count_wrong(src, dst, simulate(plan, distribute(src)), dtype, &err), 0)
            << "case " << i << " " << src.str() << " -> [" << to_string(dst.placements()) << "] "
            << to_string(c.strategy) << ": " << err;
      } catch (const std::exception& e) {
        FAIL() << "case " << i << " " << src.str() << " -> [" << to_string(dst.placements()) << "] "
               << to_string(c.strategy) << ": " << e.what();
      }
      partial_p2p += c.strategy == Strategy::kP2P && src.has_partial();
    }
  }
  EXPECT_GT(partial_p2p, 500);
}

TEST(PlannerFusion, SmallNvlinkStepsFuseAndTheChoiceSurvivesJson) {
  Mesh mesh({2});
  const Dims small{64, 64}, large{8192, 8192};
  PlanOptions o;
  o.strategy = Strategy::kP2P;
  o.transport = Transport::kNvlink;
  auto fused_steps = [](const Plan& p) {
    int n = 0;
    for (const Step& s : p.steps()) n += s.fused;
    return n;
  };
  // auto: a 16 KiB exchange is dominated by per-copy launch and signal costs, a 256 MiB one by bandwidth.
  Plan tiny =
      make_plan(Layout(mesh, {Placement::shard(0)}, small), Layout(mesh, {Placement::shard(1)}, small), DType::kF32, o);
  EXPECT_EQ(fused_steps(tiny), 1);
  Plan big =
      make_plan(Layout(mesh, {Placement::shard(0)}, large), Layout(mesh, {Placement::shard(1)}, large), DType::kF32, o);
  EXPECT_EQ(fused_steps(big), 0);
  o.fusion = Fusion::kNever;
  EXPECT_EQ(fused_steps(make_plan(tiny.src(), tiny.dst(), DType::kF32, o)), 0);
  o.fusion = Fusion::kAlways;
  Plan forced = make_plan(big.src(), big.dst(), DType::kF32, o);
  EXPECT_EQ(fused_steps(forced), 1);
  EXPECT_EQ(fused_steps(plan_from_json(plan_to_json(forced))), 1);
  EXPECT_EQ(plan_to_json(plan_from_json(plan_to_json(forced))), plan_to_json(forced));
  // Collective plans run on NCCL and never fuse, whatever is asked.
  o.transport = Transport::kAuto;
  o.strategy = Strategy::kCollective;
  EXPECT_EQ(fused_steps(make_plan(big.src(), big.dst(), DType::kF32, o)), 0);
  EXPECT_THROW(parse_fusion("sometimes"), Error);
}

}  // namespace
}  // namespace reshard
