// Box algebra, checked element by element against brute-force membership on small grids.
#include <gtest/gtest.h>

#include <random>

#include "reshard/box.hpp"
#include "reshard/rank_boxes.hpp"

namespace reshard {
namespace {

constexpr int kGrid = 6;

bool in_box(const Box& b, const Dims& x) {
  for (int d = 0; d < b.ndim(); ++d)
    if (x[d] < b.offset[d] || x[d] >= b.offset[d] + b.shape[d]) return false;
  return true;
}

Box random_box(std::mt19937& rng, int nd) {
  Box b{Dims(nd), Dims(nd)};
  for (int d = 0; d < nd; ++d) {
    b.offset[d] = std::uniform_int_distribution<int>(0, kGrid - 1)(rng);
    b.shape[d] = std::uniform_int_distribution<int>(0, kGrid - static_cast<int>(b.offset[d]))(rng);
  }
  return b;
}

// Calls f(x) for every point of the kGrid^nd grid.
template <class F>
void for_each_point(int nd, F f) {
  Dims x(nd, 0);
  while (true) {
    f(x);
    int d = nd - 1;
    while (d >= 0 && ++x[d] == kGrid) x[d--] = 0;
    if (d < 0) return;
  }
}

TEST(Box, IntersectionHoldsExactlyTheCommonElements) {
  std::mt19937 rng(1);
  for (int trial = 0; trial < 400; ++trial) {
    int nd = 1 + trial % 3;
    Box a = random_box(rng, nd), b = random_box(rng, nd);
    Box c = intersect(a, b);
    Index count = 0;
    for_each_point(nd, [&](const Dims& x) {
      bool both = in_box(a, x) && in_box(b, x);
      EXPECT_EQ(in_box(c, x), both) << to_string(a) << " & " << to_string(b);
      count += both;
    });
    EXPECT_EQ(volume(c), count);
    EXPECT_EQ(is_empty(c), count == 0);
  }
}

TEST(Box, ContainmentMatchesMembership) {
  std::mt19937 rng(2);
  for (int trial = 0; trial < 400; ++trial) {
    int nd = 1 + trial % 3;
    Box outer = random_box(rng, nd), inner = random_box(rng, nd);
    if (trial % 4 == 0) inner = intersect(outer, inner);  // make true cases common
    bool all_in = true;
    for_each_point(nd, [&](const Dims& x) { all_in = all_in && (!in_box(inner, x) || in_box(outer, x)); });
    EXPECT_EQ(contains(outer, inner), all_in) << to_string(outer) << " ⊇ " << to_string(inner);
  }
}

TEST(Box, LocalOffsetsAndContiguityMatchRowMajorEnumeration) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 400; ++trial) {
    int nd = 1 + trial % 3;
    Box owner = random_box(rng, nd);
    Box inner = intersect(owner, random_box(rng, nd));
    if (is_empty(inner)) continue;
    Dims strides = row_major_strides(owner.shape);
    // Every element of inner, in row-major order, and its index in the owner's local tensor.
    std::vector<Index> indices;
    for_each_point(nd, [&](const Dims& x) {
      if (!in_box(inner, x)) return;
      Index idx = 0;
      for (int d = 0; d < nd; ++d) idx += (x[d] - owner.offset[d]) * strides[d];
      indices.push_back(idx);
    });
    ASSERT_EQ(static_cast<Index>(indices.size()), volume(inner));
    EXPECT_EQ(local_offset(owner, inner), indices.front());
    bool contiguous = true;
    for (size_t i = 1; i < indices.size(); ++i) contiguous = contiguous && indices[i] == indices[i - 1] + 1;
    EXPECT_EQ(is_contiguous_in(owner, inner), contiguous) << to_string(owner) << " / " << to_string(inner);
  }
}

TEST(Box, TextForm) {
  EXPECT_EQ(to_string(Box{{0, 2}, {4, 3}}), "[0:4, 2:5]");
  EXPECT_EQ(to_string(Box{{3}, {0}}), "[3:3] (empty)");
  EXPECT_EQ(volume(whole(Dims{})), 1);
}

// RankBoxes draws its tables' storage from a per-thread pool that destroyed RankBoxes refill (rank_boxes.hpp): a
// table built in reused storage, larger or smaller, holds exactly every rank's box and volume, uneven ones included.
TEST(RankBoxes, TablesInReusedStorageHoldEveryRanksBox) {
  for (int round = 0; round < 2; ++round) {
    for (const std::vector<int>& shape : {std::vector<int>{64, 256}, {32, 64}, {3, 700}, {64, 256}}) {
      const Mesh mesh(shape);
      const Layout layout(mesh, parse_placements(round == 0 ? "S0,S1" : "S1,S1"), Dims{10007, 4099});
      const RankBoxes boxes(layout);
      ASSERT_EQ(boxes.size(), mesh.world_size());
      Index total = 0;
      Dims coord(mesh.ndim(), 0);
      for (int rank = 0; rank < mesh.size(); ++rank) {
        coord[0] = rank / shape[1];
        coord[1] = rank % shape[1];
        const Box expected = layout.box_at(coord);
        ASSERT_EQ(boxes[rank], expected) << mesh.str() << " rank " << rank;
        ASSERT_EQ(boxes.volume(rank), volume(expected));
        total += volume(expected);
      }
      EXPECT_EQ(boxes.total_volume(), total);
    }
  }
}

}  // namespace
}  // namespace reshard
