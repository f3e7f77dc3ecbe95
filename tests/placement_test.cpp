#include <gtest/gtest.h>

#include "reshard/dtype.hpp"
#include "reshard/placement.hpp"

namespace reshard {
namespace {

TEST(Placement, ParsesEveryDocumentedForm) {
  EXPECT_EQ(parse_placement("R"), Placement::replicate());
  EXPECT_EQ(parse_placement("S0"), Placement::shard(0));
  EXPECT_EQ(parse_placement("S(1)"), Placement::shard(1));
  EXPECT_EQ(parse_placement("S-1"), Placement::shard(-1));
  EXPECT_EQ(parse_placement("S(-2)"), Placement::shard(-2));
  EXPECT_EQ(parse_placement("P"), Placement::partial(ReduceOp::kSum));
  EXPECT_EQ(parse_placement("P(sum)"), Placement::partial(ReduceOp::kSum));
  EXPECT_EQ(parse_placement("P(avg)"), Placement::partial(ReduceOp::kAvg));
  EXPECT_EQ(parse_placement("P(max)"), Placement::partial(ReduceOp::kMax));
  EXPECT_EQ(parse_placement("P(min)"), Placement::partial(ReduceOp::kMin));
  EXPECT_EQ(parse_placement("Shard(2)"), Placement::shard(2));
  EXPECT_EQ(parse_placement("Replicate()"), Placement::replicate());
  EXPECT_EQ(parse_placement("Partial()"), Placement::partial());
  EXPECT_EQ(parse_placement("Partial(avg)"), Placement::partial(ReduceOp::kAvg));
}

TEST(Placement, CanonicalTextRoundTrips) {
  for (Placement p : {Placement::replicate(), Placement::shard(0), Placement::shard(3), Placement::shard(-1),
                      Placement::partial(ReduceOp::kSum), Placement::partial(ReduceOp::kAvg),
                      Placement::partial(ReduceOp::kMax), Placement::partial(ReduceOp::kMin)}) {
    EXPECT_EQ(parse_placement(to_string(p)), p) << to_string(p);
  }
  EXPECT_EQ(to_string(parse_placements("S(0), R ,P(avg)")), "S0,R,P(avg)");
}

TEST(Placement, ListSplitsOnTopLevelCommasOnly) {
  std::vector<Placement> ps = parse_placements("Shard(0),Partial(max),R");
  ASSERT_EQ(ps.size(), 3u);
  EXPECT_EQ(ps[1], Placement::partial(ReduceOp::kMax));
}

TEST(Placement, NormalizeNegativeDims) {
  EXPECT_EQ(normalize(Placement::shard(-1), 3), Placement::shard(2));
  EXPECT_EQ(normalize(Placement::shard(-3), 3), Placement::shard(0));
  EXPECT_EQ(normalize(Placement::replicate(), 0), Placement::replicate());
}

TEST(DType, SizesAndNames) {
  for (DType t : kAllDTypes) EXPECT_EQ(parse_dtype(to_string(t)), t);
  EXPECT_EQ(element_size(DType::kBF16), 2);
  EXPECT_EQ(element_size(DType::kF64), 8);
  EXPECT_EQ(element_size(DType::kU8), 1);
  EXPECT_EQ(parse_dtype("bfloat16"), DType::kBF16);
  EXPECT_TRUE(is_floating(DType::kF16));
  EXPECT_FALSE(is_floating(DType::kI32));
}

}  // namespace
}  // namespace reshard
