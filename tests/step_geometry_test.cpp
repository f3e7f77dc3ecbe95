// The step geometry's engine rule agrees with the copy views the lowering builds (box_copy), on every region of
// random boxes: the planner prices exactly what the executor will run. And group_link's shortcut on row-major meshes
// agrees with a walk over the groups' members.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "../planner/src/region_views.hpp"
#include "../planner/src/step_geometry.hpp"
#include "../planner/src/transitions.hpp"

namespace reshard::detail {
namespace {

TEST(StepGeometry, CopyEngineRuleMatchesTheLoweredViews) {
  std::mt19937 rng(7);
  auto pick = [&](Index lo, Index hi) { return std::uniform_int_distribution<Index>(lo, hi)(rng); };
  int engine = 0, kernel = 0;
  for (int c = 0; c < 20000; ++c) {
    const int nd = static_cast<int>(pick(1, 5));
    Dims global(nd), a_off(nd), a_shape(nd), b_off(nd), b_shape(nd), r_off(nd), r_shape(nd);
    for (int d = 0; d < nd; ++d) {
      global[d] = pick(1, 9);
      a_off[d] = pick(0, global[d] - 1);
      a_shape[d] = pick(1, global[d] - a_off[d]);
      b_off[d] = pick(0, global[d] - 1);
      b_shape[d] = pick(1, global[d] - b_off[d]);
      // A region inside both boxes, or an empty one where they do not meet.
      const Index lo = std::max(a_off[d], b_off[d]), hi = std::min(a_off[d] + a_shape[d], b_off[d] + b_shape[d]);
      r_off[d] = lo < hi ? pick(lo, hi - 1) : lo;
      r_shape[d] = lo < hi ? pick(1, hi - r_off[d]) : 0;
    }
    const Box from{a_off, a_shape}, to{b_off, b_shape}, region{r_off, r_shape};
    for (int es : {1, 2, 4, 8}) {
      for (Index min_row : {Index(0), Index(8), Index(16), Index(64)}) {
        const CopyRegion view = box_copy(BufferRef{}, from, BufferRef{}, to, region);
        const int vd = view.shape.size();
        const CopyEngine want =
            vd <= 3 && view.shape[vd - 1] * es >= min_row ? CopyEngine::kCopyEngine : CopyEngine::kKernel;
        ASSERT_EQ(copy_engine_for(region, from, to, es, min_row), want)
            << "region " << to_string(region) << " from " << to_string(from) << " to " << to_string(to) << " es " << es
            << " min_row " << min_row;
        (want == CopyEngine::kCopyEngine ? engine : kernel)++;
      }
    }
  }
  EXPECT_GT(engine, 1000);  // both outcomes are exercised
  EXPECT_GT(kernel, 1000);
}

// group_link judges row-major meshes from their groups' lowest and highest members; it must agree with a walk over
// the members of the first and last coordinates' groups (what it does on meshes with explicit ranks).
TEST(StepGeometry, GroupLinkMatchesTheMemberWalk) {
  auto walked = [](const Mesh& mesh, std::span<const int> dims, const Topology& topology) {
    Dims last(mesh.ndim());
    for (int k = 0; k < mesh.ndim(); ++k) last[k] = mesh.dim_size(k) - 1;
    for (int r : {mesh.rank_at(Dims(mesh.ndim())), mesh.rank_at(last)}) {
      bool spans = false;
      for (int m : mesh.group(r, dims)) spans = spans || !topology.same_node(m, mesh.group(r, dims).front());
      if (spans) return LinkClass::kInterNode;
    }
    return LinkClass::kIntraNode;
  };
  const std::vector<std::vector<int>> shapes = {{1},    {8},       {2, 2},    {3, 5},     {4, 4},   {8, 8},
                                                {4, 1}, {3, 1, 4}, {2, 3, 4}, {8, 8, 16}, {16, 64}, {3, 2, 1, 5}};
  int checked = 0;
  for (const std::vector<int>& shape : shapes) {
    const Mesh mesh(shape);
    for (int per_node : {1, 2, 3, 4, 5, 8, 12, 16, 64, 1000}) {
      Topology topology;
      topology.ranks_per_node = per_node;
      for (unsigned mask = 1; mask < (1u << mesh.ndim()); ++mask) {
        std::vector<int> dims;
        for (int k = 0; k < mesh.ndim(); ++k)
          if (mask & (1u << k)) dims.push_back(k);
        do {  // every order of the dims
          EXPECT_EQ(group_link(mesh, dims, topology), walked(mesh, dims, topology))
              << mesh.str() << " dims " << ::testing::PrintToString(dims) << " ranks per node " << per_node;
          ++checked;
        } while (std::next_permutation(dims.begin(), dims.end()));
      }
    }
  }
  EXPECT_GT(checked, 1000);
}

}  // namespace
}  // namespace reshard::detail
