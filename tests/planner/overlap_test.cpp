// P2P overlap regions and the documented source-choice rule.
#include <gtest/gtest.h>

#include <map>

#include "reshard/overlap.hpp"
#include "reshard/planner.hpp"
#include "simulator.hpp"

namespace reshard {
namespace {

TEST(Overlap, SeedExampleOnlyRanks1And2Exchange) {
  Layout src(Mesh({2, 2}), parse_placements("S0,S1"), Dims{8192, 8192});
  OverlapIndex index(src, src.with_placements(parse_placements("S1,S0")), Topology{8}, 2);
  int crossing = 0;
  for (const Transfer& t : index.all_transfers()) {
    if (t.is_local()) continue;
    ++crossing;
    EXPECT_TRUE((t.src == 1 && t.dst == 2) || (t.src == 2 && t.dst == 1));
    EXPECT_EQ(t.bytes, 4096LL * 4096 * 2);
  }
  EXPECT_EQ(crossing, 2);
}

TEST(Overlap, OwnDataIsCopiedLocally) {
  // R -> S0: every rank already holds everything it needs.
  Layout src(Mesh({4}), parse_placements("R"), Dims{10, 3});
  OverlapIndex index(src, src.with_placements(parse_placements("S0")), Topology{8}, 4);
  for (const Transfer& t : index.all_transfers()) EXPECT_TRUE(t.is_local());
}

TEST(Overlap, PrefersAHolderOnTheSameNode) {
  // [R, S0] -> [S0, R] on 2x4 with 4 ranks per node: mesh dim 0 is the node. Every block has one holder per
  // node, so no transfer should cross nodes.
  Layout src(Mesh({2, 4}), parse_placements("R,S0"), Dims{16, 8});
  OverlapIndex index(src, src.with_placements(parse_placements("S0,R")), Topology{4}, 4);
  for (const Transfer& t : index.all_transfers())
    EXPECT_TRUE(Topology{4}.same_node(t.src, t.dst)) << t.src << "->" << t.dst;
}

TEST(Overlap, ReplicasShareTheSendsEvenly) {
  // [R, S0] -> [R, S1] on 4x4, one node: every block has 4 replicas; the aligned rule gives each the same load.
  Layout src(Mesh({4, 4}), parse_placements("R,S0"), Dims{64, 64});
  OverlapIndex index(src, src.with_placements(parse_placements("R,S1")), Topology{16}, 4);
  std::map<int, Index> sent;
  Index total = 0;
  for (const Transfer& t : index.all_transfers()) {
    if (t.is_local()) continue;
    sent[t.src] += t.bytes;
    total += t.bytes;
  }
  ASSERT_EQ(sent.size(), 16u);
  for (auto [rank, bytes] : sent) EXPECT_EQ(bytes, total / 16) << "rank " << rank;
}

TEST(Overlap, BothDirectionsEnumerateTheSameTransfers) {
  for (auto [from, to] : {std::pair{"S0,S1", "S1,S0"}, std::pair{"R,S0", "S1,R"}, std::pair{"S0,S0", "R,S1"}}) {
    Layout src(Mesh({3, 4}), parse_placements(from), Dims{23, 17});
    OverlapIndex index(src, src.with_placements(parse_placements(to)), Topology{4}, 8);
    std::vector<Transfer> all = index.all_transfers(), by_src;
    for (int r = 0; r < 12; ++r) index.transfers_from(r, by_src);
    std::sort(by_src.begin(), by_src.end(),
              [](const Transfer& x, const Transfer& y) { return std::tie(x.src, x.dst) < std::tie(y.src, y.dst); });
    EXPECT_EQ(all, by_src) << from << " -> " << to;
    EXPECT_EQ(
        [&] {
          Index b = 0;
          for (const Transfer& t : all) b += t.is_local() ? 0 : t.bytes;
          return b;
        }(),
        testing::minimum_bytes(src, src.with_placements(parse_placements(to)), 8));
  }
}

}  // namespace
}  // namespace reshard
