#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "reshard/dtype.hpp"
#include "reshard/error.hpp"
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

// The forms PyTorch prints (repr and str of each placement, possibly module-qualified), as docs/api.md lists them.
TEST(Placement, ParsesPyTorchPrintedForms) {
  EXPECT_EQ(parse_placement("Shard(dim=0)"), Placement::shard(0));
  EXPECT_EQ(parse_placement("Shard(dim=-1)"), Placement::shard(-1));
  EXPECT_EQ(parse_placement(" Shard( dim = 2 ) "), Placement::shard(2));
  EXPECT_EQ(parse_placement("torch.distributed.tensor.placement_types.Shard(dim=1)"), Placement::shard(1));
  EXPECT_EQ(parse_placement("Replicate"), Placement::replicate());
  EXPECT_EQ(parse_placement("Partial(reduce_op='sum')"), Placement::partial(ReduceOp::kSum));
  EXPECT_EQ(parse_placement("Partial(reduce_op=\"avg\")"), Placement::partial(ReduceOp::kAvg));
  EXPECT_EQ(parse_placement("Partial(reduce_op=max)"), Placement::partial(ReduceOp::kMax));
  EXPECT_EQ(parse_placement("Partial('min')"), Placement::partial(ReduceOp::kMin));
  EXPECT_EQ(parse_placement("Partial(sum)"), Placement::partial(ReduceOp::kSum));
  EXPECT_EQ(parse_placement("P('avg')"), Placement::partial(ReduceOp::kAvg));
  EXPECT_EQ(parse_placement("_StridedShard(dim=0, sf=2)"), Placement::strided_shard(0, 2));
  EXPECT_EQ(parse_placement("_StridedShard(dim=1, split_factor=4)"), Placement::strided_shard(1, 4));
  EXPECT_EQ(parse_placement("_StridedShard(split_factor=3, dim=0)"), Placement::strided_shard(0, 3));
  EXPECT_EQ(parse_placement("_StridedShard(0, 2)"), Placement::strided_shard(0, 2));
  EXPECT_EQ(parse_placement("_S(0, 2)"), Placement::strided_shard(0, 2));
  EXPECT_EQ(parse_placement("SS0/2"), Placement::strided_shard(0, 2));
  EXPECT_EQ(parse_placement("SS-1/3"), Placement::strided_shard(-1, 3));
  EXPECT_EQ(parse_placement("SS(1, 3)"), Placement::strided_shard(1, 3));
  EXPECT_EQ(parse_placement("SS0/1"), Placement::shard(0));  // a split factor of 1 is Shard
}

TEST(Placement, ParsesPythonTuplesAndLists) {
  const std::vector<Placement> s0_r{Placement::shard(0), Placement::replicate()};
  EXPECT_EQ(parse_placements("(Shard(dim=0), Replicate())"), s0_r);
  EXPECT_EQ(parse_placements("[Shard(dim=0), Replicate()]"), s0_r);
  EXPECT_EQ(parse_placements("(S(0), R)"), s0_r);
  EXPECT_EQ(parse_placements("S0,R"), s0_r);
  EXPECT_EQ(parse_placements("(Shard(dim=0),)"), std::vector<Placement>{Placement::shard(0)});
  EXPECT_EQ(parse_placements("(_StridedShard(dim=0, sf=2), Shard(dim=0))"),
            (std::vector<Placement>{Placement::strided_shard(0, 2), Placement::shard(0)}));
  EXPECT_EQ(parse_placements("(Partial(reduce_op='avg'), Shard(dim=1))"),
            (std::vector<Placement>{Placement::partial(ReduceOp::kAvg), Placement::shard(1)}));
}

TEST(Placement, RefusesMalformedPyTorchForms) {
  auto parse_error = [](const char* text) {
    try {
      parse_placements(text);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kParse) << text;
      return std::string(e.what());
    }
    ADD_FAILURE() << text << " parsed";
    return std::string();
  };
  EXPECT_NE(parse_error("Partial(reduce_op='product')").find("unknown reduce op 'product'"), std::string::npos);
  EXPECT_NE(parse_error("_StridedShard(dim=0)").find("split factor is missing"), std::string::npos);
  EXPECT_NE(parse_error("SS0/0").find("split factor '0' is not a whole number >= 1"), std::string::npos);
  EXPECT_NE(parse_error("SS0").find("expected SS<d>/<split factor>"), std::string::npos);
  EXPECT_NE(parse_error("Shard(dim=0, foo=1)").find("unknown argument 'foo'"), std::string::npos);
  EXPECT_NE(parse_error("Shard(dim=0, dim=1)").find("'dim' is given twice"), std::string::npos);
  EXPECT_NE(parse_error("Shard(0, 1)").find("too many arguments"), std::string::npos);
  EXPECT_NE(parse_error("Shard()").find("shard dim is missing"), std::string::npos);
  EXPECT_NE(parse_error("Replicate(1)").find("takes no arguments"), std::string::npos);
  EXPECT_NE(parse_error("()").find("are empty"), std::string::npos);
  EXPECT_NE(parse_error("(S0, R").find("unbalanced"), std::string::npos);
  EXPECT_NE(parse_error("not.a-name.Shard(0)").find("unknown placement"), std::string::npos);
}

TEST(Placement, CanonicalTextRoundTrips) {
  for (Placement p : {Placement::replicate(), Placement::shard(0), Placement::shard(3), Placement::shard(-1),
                      Placement::strided_shard(0, 2), Placement::strided_shard(2, 7), Placement::strided_shard(-1, 3),
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
  EXPECT_EQ(normalize(Placement::strided_shard(-1, 4), 2), Placement::strided_shard(1, 4));
}

TEST(DType, SizesAndNames) {
  for (DType t : kAllDTypes) EXPECT_EQ(parse_dtype(to_string(t)), t);
  EXPECT_EQ(element_size(DType::kBF16), 2);
  EXPECT_EQ(element_size(DType::kF64), 8);
  EXPECT_EQ(element_size(DType::kU8), 1);
  EXPECT_EQ(element_size(DType::kF8E4M3), 1);
  EXPECT_EQ(element_size(DType::kF8E5M2), 1);
  EXPECT_EQ(element_size(DType::kBool), 1);
  EXPECT_EQ(element_size(DType::kI16), 2);
  EXPECT_EQ(element_size(DType::kC64), 8);
  EXPECT_TRUE(is_floating(DType::kF16));
  EXPECT_TRUE(is_floating(DType::kC64));
  EXPECT_FALSE(is_floating(DType::kI32));
  EXPECT_FALSE(is_floating(DType::kBool));
}

// Every name docs/api.md lists, with and without "torch.".
TEST(DType, ParsesCliAndPyTorchNames) {
  const std::pair<const char*, DType> names[] = {
      {"f64", DType::kF64},         {"fp64", DType::kF64},      {"float64", DType::kF64},
      {"double", DType::kF64},      {"f32", DType::kF32},       {"fp32", DType::kF32},
      {"float32", DType::kF32},     {"float", DType::kF32},     {"f16", DType::kF16},
      {"fp16", DType::kF16},        {"float16", DType::kF16},   {"half", DType::kF16},
      {"bf16", DType::kBF16},       {"bfloat16", DType::kBF16}, {"i64", DType::kI64},
      {"int64", DType::kI64},       {"long", DType::kI64},      {"i32", DType::kI32},
      {"int32", DType::kI32},       {"int", DType::kI32},       {"i16", DType::kI16},
      {"int16", DType::kI16},       {"short", DType::kI16},     {"i8", DType::kI8},
      {"int8", DType::kI8},         {"u8", DType::kU8},         {"uint8", DType::kU8},
      {"bool", DType::kBool},       {"f8e4m3", DType::kF8E4M3}, {"float8_e4m3fn", DType::kF8E4M3},
      {"fp8_e4m3", DType::kF8E4M3}, {"f8e5m2", DType::kF8E5M2}, {"float8_e5m2", DType::kF8E5M2},
      {"fp8_e5m2", DType::kF8E5M2}, {"c64", DType::kC64},       {"complex64", DType::kC64},
      {"cfloat", DType::kC64},
  };
  for (const auto& [name, t] : names) {
    EXPECT_EQ(parse_dtype(name), t) << name;
    EXPECT_EQ(parse_dtype(std::string("torch.") + name), t) << name;
  }
  EXPECT_THROW(parse_dtype("torch."), Error);
  EXPECT_THROW(parse_dtype("float8_e4m3fnuz"), Error);  // a different format
  EXPECT_THROW(parse_dtype("complex128"), Error);
}

TEST(DType, PartialOnlyWhereItReduces) {
  for (DType t :
       {DType::kF64, DType::kF32, DType::kF16, DType::kBF16, DType::kI64, DType::kI32, DType::kI8, DType::kU8})
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}) EXPECT_TRUE(reducible(t, op));
  EXPECT_TRUE(reducible(DType::kC64, ReduceOp::kSum));
  EXPECT_TRUE(reducible(DType::kC64, ReduceOp::kAvg));
  EXPECT_FALSE(reducible(DType::kC64, ReduceOp::kMax));
  for (DType t : {DType::kF8E4M3, DType::kF8E5M2, DType::kBool, DType::kI16})
    EXPECT_FALSE(reducible(t, ReduceOp::kSum));
  try {
    require_reducible(DType::kF8E5M2, ReduceOp::kAvg);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("Partial(avg) is not supported on f8e5m2"), std::string::npos) << e.what();
  }
  try {
    require_reducible(DType::kC64, ReduceOp::kMin);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Partial(min) is not supported on c64"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace reshard
