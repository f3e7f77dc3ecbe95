// The step geometry's engine rules (peer and local copies) agree with the copy views the lowering builds (box_copy), on
// every region of random boxes: the planner prices exactly what the executor will run. And group_link's shortcut on
// row-major meshes agrees with a walk over the groups' members, and the group shapes' one-pass check with the box
// helpers.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "plan/transitions.hpp"
#include "pricing/region_views.hpp"
#include "pricing/step_geometry.hpp"

namespace reshard::detail {
namespace {

TEST(StepGeometry, CopyEngineRuleMatchesTheLoweredViews) {
  std::mt19937 rng(7);
  auto pick = [&](Index lo, Index hi) { return std::uniform_int_distribution<Index>(lo, hi)(rng); };
  int engine = 0, kernel = 0, local_engine = 0, local_kernel = 0;
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
        // Local copies: the engines for one contiguous block (a 1-D view), the kernel otherwise; beside compute
        // (low-SM plans) the rule above.
        const CopyEngine want_local = vd == 1 ? CopyEngine::kCopyEngine : CopyEngine::kKernel;
        ASSERT_EQ(local_copy_engine_for(region, from, to, es, min_row, false), want_local)
            << "local: region " << to_string(region) << " from " << to_string(from) << " to " << to_string(to);
        ASSERT_EQ(local_copy_engine_for(region, from, to, es, min_row, true), want);
        (want_local == CopyEngine::kCopyEngine ? local_engine : local_kernel)++;
      }
    }
  }
  EXPECT_GT(engine, 1000);  // every outcome is exercised
  EXPECT_GT(kernel, 1000);
  EXPECT_GT(local_engine, 1000);
  EXPECT_GT(local_kernel, 1000);
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

// gather_shape and scatter_shape check a group's boxes in one pass per member; they must agree with the box helpers
// (contains, is_contiguous_in, local_offset) on random layouts: uneven shards, empty boxes, every set of mesh dims.
TEST(StepGeometry, GroupShapesMatchTheBoxHelpers) {
  std::mt19937 rng(15);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto back_to_back = [](const Box& whole, Index whole_volume, const RankBoxes& boxes, const std::vector<int>& group,
                         Index chunk) {
    if (whole_volume != chunk * static_cast<Index>(group.size())) return false;
    for (size_t j = 0; j < group.size(); ++j) {
      const Box& x = boxes[group[j]];
      if (boxes.volume(group[j]) != chunk || !contains(whole, x) || !is_contiguous_in(whole, x)) return false;
      if (chunk != 0 && local_offset(whole, x) != static_cast<Index>(j) * chunk) return false;
    }
    return true;
  };
  int in_place = 0, checked = 0;
  for (int c = 0; c < 3000; ++c) {
    std::vector<int> shape(pick(1, 3));
    for (int& m : shape) m = pick(1, 4);
    const Mesh mesh(shape);
    const int nd = pick(1, 3);
    Dims extent(nd);
    for (int d = 0; d < nd; ++d) extent[d] = pick(0, 4) == 0 ? pick(0, 5) : pick(6, 40);
    auto placements = [&] {
      std::vector<Placement> ps;
      for (size_t k = 0; k < shape.size(); ++k) {
        const int x = pick(0, nd);
        ps.push_back(x == 0 ? Placement::replicate() : Placement::shard(x - 1));
      }
      return ps;
    };
    const RankBoxes a(Layout(mesh, placements(), extent)), b(Layout(mesh, placements(), extent));
    std::vector<int> dims;
    for (int k = 0; k < mesh.ndim(); ++k)
      if (pick(0, 1)) dims.push_back(k);
    if (dims.empty()) dims.push_back(pick(0, mesh.ndim() - 1));
    for (int r = 0; r < mesh.size(); ++r) {
      const std::vector<int> group = mesh.group(r, dims);
      Index gather_chunk = 0, scatter_chunk = 0;
      for (int m : group) {
        gather_chunk = std::max(gather_chunk, a.volume(m));
        scatter_chunk = std::max(scatter_chunk, b.volume(m));
      }
      const GroupShape g = gather_shape(a, b, dims, r), s = scatter_shape(a, b, dims, r);
      EXPECT_EQ(g.recv_in_place, back_to_back(b[r], b.volume(r), a, group, gather_chunk)) << "case " << c;
      EXPECT_EQ(s.send_in_place, back_to_back(a[r], a.volume(r), b, group, scatter_chunk)) << "case " << c;
      in_place += g.recv_in_place + s.send_in_place;
      checked += 2;
    }
  }
  EXPECT_GT(in_place, checked / 20);  // both answers are common
  EXPECT_LT(in_place, checked - checked / 20);
}

}  // namespace
}  // namespace reshard::detail
