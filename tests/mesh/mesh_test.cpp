#include <gtest/gtest.h>

#include <set>

#include "reshard/mesh.hpp"
#include "reshard/topology.hpp"

namespace reshard {
namespace {

TEST(Mesh, RowMajorCoordinatesRoundTrip) {
  Mesh mesh({2, 3, 4});
  EXPECT_EQ(mesh.size(), 24);
  for (int r = 0; r < mesh.size(); ++r) {
    Dims c = mesh.coord_of(r);
    EXPECT_EQ(c[0] * 12 + c[1] * 4 + c[2], r);
    EXPECT_EQ(mesh.rank_at(c), r);
  }
}

TEST(Mesh, GroupsShareAllOtherCoordinates) {
  Mesh mesh({2, 3, 4});
  for (int r = 0; r < mesh.size(); ++r) {
    for (int d = 0; d < 3; ++d) {
      std::vector<int> g = mesh.group(r, d);
      ASSERT_EQ(static_cast<int>(g.size()), mesh.dim_size(d));
      Dims mine = mesh.coord_of(r);
      for (int i = 0; i < static_cast<int>(g.size()); ++i) {
        Dims c = mesh.coord_of(g[i]);
        for (int k = 0; k < 3; ++k) EXPECT_EQ(c[k], k == d ? i : mine[k]);
      }
      int dims[] = {d};
      EXPECT_EQ(g[mesh.group_index(r, dims)], r);
    }
  }
}

TEST(Mesh, FlattenedGroupIsRowMajorOverTheGivenDims) {
  Mesh mesh({2, 3, 4});
  const int dims[] = {0, 2};
  for (int r = 0; r < mesh.size(); ++r) {
    std::vector<int> g = mesh.group(r, dims);
    ASSERT_EQ(g.size(), 8u);
    for (int i = 0; i < 8; ++i) {
      Dims c = mesh.coord_of(g[i]);
      EXPECT_EQ(c[0], i / 4);
      EXPECT_EQ(c[2], i % 4);
      EXPECT_EQ(c[1], mesh.coord_of(r)[1]);
    }
    EXPECT_EQ(g[mesh.group_index(r, dims)], r);
  }
}

TEST(Mesh, ExplicitRankList) {
  Mesh mesh({2, 2}, {3, 1, 2, 0});
  EXPECT_TRUE(mesh.has_explicit_ranks());
  EXPECT_EQ(mesh.rank_at(Dims{0, 0}), 3);
  EXPECT_EQ(mesh.rank_at(Dims{1, 1}), 0);
  EXPECT_EQ(mesh.coord_of(3), (Dims{0, 0}));
  EXPECT_EQ(mesh.coord_of(1), (Dims{0, 1}));
  EXPECT_EQ(mesh.group(3, 1), (std::vector<int>{3, 1}));
  EXPECT_EQ(mesh.group(3, 0), (std::vector<int>{3, 2}));
  EXPECT_EQ(mesh.str(), "2x2[3,1,2,0]");
  // An identity rank list is the row-major mesh.
  EXPECT_EQ(Mesh({2, 2}, {0, 1, 2, 3}), Mesh({2, 2}));
}

TEST(Mesh, ParseShape) {
  EXPECT_EQ(parse_mesh_shape("2x4"), (std::vector<int>{2, 4}));
  EXPECT_EQ(parse_mesh_shape("8"), (std::vector<int>{8}));
  EXPECT_EQ(Mesh(parse_mesh_shape("16x8x8")).size(), 1024);
}

TEST(Topology, NodesByRanksPerNode) {
  Topology t{8};
  EXPECT_TRUE(t.same_node(0, 7));
  EXPECT_FALSE(t.same_node(7, 8));
  EXPECT_EQ(t.link(3, 12), LinkClass::kInterNode);
  EXPECT_EQ(t.link(9, 12), LinkClass::kIntraNode);
}

}  // namespace
}  // namespace reshard
