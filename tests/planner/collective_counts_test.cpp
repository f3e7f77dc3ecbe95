// The collective strategy never uses more collectives than PyTorch 2.11 does in its own test_redistribute.py
// (the floor the planner issue sets), at PyTorch's test sizes and at large sizes.
#include <gtest/gtest.h>

#include "placement_sets.hpp"
#include "reshard/planner.hpp"
#include "simulator.hpp"

namespace reshard {
namespace {

struct CountCase {
  std::vector<int> mesh;
  const char* from;
  const char* to;
  int pytorch_count;
};

class CollectiveCounts : public ::testing::TestWithParam<CountCase> {};

TEST_P(CollectiveCounts, AtMostPyTorchsCountAtItsTestSizes) {
  const CountCase& c = GetParam();
  Mesh mesh(c.mesh);
  // PyTorch's tests use 8x8x8 (3-D meshes) and small 2-D tensors; uneven variants too.
  std::vector<Dims> shapes =
      mesh.ndim() == 3 ? std::vector<Dims>{{8, 8, 8}, {9, 7, 5}} : std::vector<Dims>{{8, 8}, {9, 7}};
  for (const Dims& shape : shapes) {
    Layout src(mesh, parse_placements(c.from), shape), dst(mesh, parse_placements(c.to), shape);
    PlanOptions o;
    o.strategy = Strategy::kCollective;
    Plan plan = make_plan(src, dst, DType::kF32, o);
    EXPECT_LE(plan.communication_steps(), c.pytorch_count) << src.str() << " -> " << c.to;
    std::string err;
    EXPECT_EQ(testing::count_wrong(dst, testing::simulate(plan, testing::distribute(src)), &err), 0) << err;
  }
}

// At large sizes the search may use more collectives when they move fewer bytes; a route within PyTorch's count
// still exists, is correct, and is never cheaper than the unconstrained choice.
TEST_P(CollectiveCounts, LargeTensorsNeverWorseThanARouteWithinPyTorchsCount) {
  const CountCase& c = GetParam();
  Mesh mesh(c.mesh);
  for (const Dims& shape : mesh.ndim() == 3 ? std::vector<Dims>{{512, 512, 512}, {24, 20, 12}}
                                            : std::vector<Dims>{{8192, 8192}, {40, 24}}) {
    Layout src(mesh, parse_placements(c.from), shape), dst(mesh, parse_placements(c.to), shape);
    PlanOptions o;
    o.strategy = Strategy::kCollective;
    Plan free = make_plan(src, dst, DType::kF32, o);
    o.max_collectives = c.pytorch_count;
    Plan capped = make_plan(src, dst, DType::kF32, o);
    EXPECT_LE(capped.communication_steps(), c.pytorch_count);
    EXPECT_LE(free.estimated_us(), capped.estimated_us() * (1 + 1e-12));
    if (volume(whole(shape)) < 100000) {
      std::string err;
      EXPECT_EQ(testing::count_wrong(dst, testing::simulate(capped, testing::distribute(src)), &err), 0) << err;
      EXPECT_EQ(testing::count_wrong(dst, testing::simulate(free, testing::distribute(src)), &err), 0) << err;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    PyTorchFloor, CollectiveCounts,
    ::testing::Values(CountCase{{2, 2}, "S0,S1", "S1,S0", 2}, CountCase{{2, 2}, "S0,S0", "S1,S1", 2},
                      CountCase{{2, 2}, "S0,S1", "S0,S0", 1}, CountCase{{2, 2, 2}, "S0,S0,S0", "S1,S1,S1", 3},
                      CountCase{{2, 2, 2}, "S0,S1,S2", "S2,S1,S0", 2}, CountCase{{2, 2, 2}, "S1,S0,S0", "R,S0,S0", 1},
                      CountCase{{2, 2, 2}, "S1,R,S0", "R,S0,S0", 2}, CountCase{{2, 2, 2}, "S0,S0,S1", "S0,S1,S2", 2},
                      CountCase{{2, 2, 2}, "S0,S1,S0", "S1,S0,S0", 3}),
    [](const auto& param_info) {  // "mesh_2_2_S0_S1_to_S1_S0"
      std::string name =
          testing::mesh_name(param_info.param.mesh) + "_" + param_info.param.from + "_to_" + param_info.param.to;
      for (char& ch : name)
        if (ch == ',') ch = '_';
      return name;
    });

TEST(CollectiveRoute, SingleCollectiveWhenOneServes) {
  Layout src(Mesh({4}), parse_placements("S0"), Dims{1024, 1024});
  Plan plan = make_plan(src, src.with_placements(parse_placements("R")), DType::kBF16, {});
  EXPECT_EQ(plan.communication_steps(), 1);
  EXPECT_EQ(plan.steps().front().kind, plan.strategy() == Strategy::kP2P ? StepKind::kP2P : StepKind::kAllGather);
}

TEST(CollectiveRoute, IdenticalLayoutsAreOneLocalCopy) {
  Layout src(Mesh({2, 2}), parse_placements("S0,R"), Dims{6, 6});
  Plan plan = make_plan(src, src, DType::kF32, {});
  ASSERT_EQ(plan.steps().size(), 1u);
  EXPECT_EQ(plan.steps()[0].kind, plan.strategy() == Strategy::kP2P ? StepKind::kP2P : StepKind::kLocal);
  EXPECT_EQ(plan.bytes_moved(), 0);
}

TEST(CollectiveRoute, SizeOneMeshDimsNeverMoveData) {
  Layout src(Mesh({1, 2}), parse_placements("S0,S1"), Dims{64, 64});
  Layout dst = src.with_placements(parse_placements("S1,S0"));
  PlanOptions o;
  o.strategy = Strategy::kCollective;
  Plan plan = make_plan(src, dst, DType::kF32, o);
  EXPECT_EQ(plan.communication_steps(), 1);  // one all_to_all on mesh dim 1; mesh dim 0 has one rank
  std::string err;
  EXPECT_EQ(testing::count_wrong(dst, testing::simulate(plan, testing::distribute(src)), &err), 0) << err;
}

}  // namespace
}  // namespace reshard
