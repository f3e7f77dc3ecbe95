// The step geometry's engine rule agrees with the copy views the lowering builds (box_copy), on every region of
// random boxes: the planner prices exactly what the executor will run.
#include <gtest/gtest.h>

#include <random>

#include "../planner/src/region_views.hpp"
#include "../planner/src/step_geometry.hpp"

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

}  // namespace
}  // namespace reshard::detail
