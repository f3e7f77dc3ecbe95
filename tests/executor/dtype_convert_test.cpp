// dtype conversion in the move (PlanSpec::to_dtype), on the host backend: the element conversion's rounding, NaN and
// overflow rules (PyTorch's tensor.to()), plans that convert (pricing, JSON, refusals), and runs over dtype pairs x
// layouts (meshes (2), (4), (2,2), between meshes; S0/S1/R/Partial sources; uneven shards; every strategy and both
// transports) with every element of every rank checked against the global tensor converted on the host.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli_runner.hpp"
#include "convert_cases.hpp"
#include "expect_error.hpp"
#include "host_runs.hpp"
#include "reshard/dtype_convert.hpp"
#include "reshard/harness.hpp"
#include "reshard/layout_format.hpp"
#include "reshard/plan_batch.hpp"
#include "reshard/plan_json.hpp"
#include "reshard/planner.hpp"

namespace reshard {
namespace {

using testing::expect_error;

std::uint64_t f32_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

std::uint64_t to(DType d, float f) { return convert_bits(f32_bits(f), DType::kF32, d); }

TEST(DTypeConvert, E4M3RoundsToNearestEvenAndOverflowsToNaN) {
  EXPECT_EQ(to(DType::kF8E4M3, 1.0f), 0x38u);
  EXPECT_EQ(to(DType::kF8E4M3, -1.0f), 0xb8u);
  EXPECT_EQ(to(DType::kF8E4M3, 16.0f), 0x58u);
  EXPECT_EQ(to(DType::kF8E4M3, 17.0f), 0x58u);  // tie: to the even mantissa (16)
  EXPECT_EQ(to(DType::kF8E4M3, 19.0f), 0x5au);  // tie between 18 and 20: 20
  EXPECT_EQ(to(DType::kF8E4M3, 448.0f), 0x7eu);
  EXPECT_EQ(to(DType::kF8E4M3, 464.0f), 0x7eu);  // tie: 448
  EXPECT_EQ(to(DType::kF8E4M3, 470.0f), 0x7fu);  // past 464: NaN, no saturation (as PyTorch)
  EXPECT_EQ(to(DType::kF8E4M3, 1e6f), 0x7fu);
  EXPECT_EQ(to(DType::kF8E4M3, -1e6f), 0xffu);
  EXPECT_EQ(to(DType::kF8E4M3, std::numeric_limits<float>::infinity()), 0x7fu);
  EXPECT_EQ(to(DType::kF8E4M3, std::numeric_limits<float>::quiet_NaN()), 0x7fu);
  EXPECT_EQ(to(DType::kF8E4M3, std::ldexp(1.0f, -9)), 0x01u);       // smallest subnormal
  EXPECT_EQ(to(DType::kF8E4M3, std::ldexp(1.0f, -10)), 0x00u);      // tie: to zero
  EXPECT_EQ(to(DType::kF8E4M3, 3 * std::ldexp(1.0f, -10)), 0x02u);  // tie: to 2 * 2^-9
  EXPECT_EQ(to(DType::kF8E4M3, -std::ldexp(1.0f, -12)), 0x80u);     // -0
}

TEST(DTypeConvert, E5M2RoundsToNearestEvenAndOverflowsToInfinity) {
  EXPECT_EQ(to(DType::kF8E5M2, 1.0f), 0x3cu);
  EXPECT_EQ(to(DType::kF8E5M2, 57344.0f), 0x7bu);  // largest finite
  EXPECT_EQ(to(DType::kF8E5M2, 61440.0f), 0x7cu);  // tie past the largest: to infinity (even)
  EXPECT_EQ(to(DType::kF8E5M2, 65536.0f), 0x7cu);
  EXPECT_EQ(to(DType::kF8E5M2, -std::numeric_limits<float>::infinity()), 0xfcu);
  EXPECT_EQ(to(DType::kF8E5M2, std::numeric_limits<float>::quiet_NaN()), 0x7fu);
  EXPECT_EQ(to(DType::kF8E5M2, std::ldexp(1.0f, -16)), 0x01u);  // smallest subnormal
  EXPECT_EQ(to(DType::kF8E5M2, 4.5f), 0x44u);                   // tie between 4 and 5: 4
  EXPECT_EQ(to(DType::kF8E5M2, 5.5f), 0x46u);                   // tie between 5 and 6: 6
}

TEST(DTypeConvert, HalfTypesRoundToNearestEven) {
  EXPECT_EQ(to(DType::kBF16, 1.0f + std::ldexp(1.0f, -8)), 0x3f80u);      // tie: down to even
  EXPECT_EQ(to(DType::kBF16, 1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82u);  // tie: up to even
  EXPECT_EQ(to(DType::kBF16, std::numeric_limits<float>::quiet_NaN()), 0x7fc0u);
  EXPECT_EQ(to(DType::kF16, 65504.0f), 0x7bffu);
  EXPECT_EQ(to(DType::kF16, 65520.0f), 0x7c00u);  // rounds past the largest: infinity
  EXPECT_EQ(to(DType::kF16, 1.0f + std::ldexp(1.0f, -11)), 0x3c00u);
  // Widening is exact; f64 -> f32 rounds once; bf16 -> fp8 through f32 (exact) then once.
  EXPECT_EQ(convert_bits(0x3f81, DType::kBF16, DType::kF32), f32_bits(1.0f + std::ldexp(1.0f, -7)));
  EXPECT_EQ(convert_bits(0x4188, DType::kBF16, DType::kF8E4M3), 0x58u);  // bf16 17 -> 16
  double d = 1.0 + std::ldexp(1.0, -30);
  std::uint64_t bits;
  std::memcpy(&bits, &d, 8);
  EXPECT_EQ(convert_bits(bits, DType::kF64, DType::kF32), f32_bits(1.0f));
}

TEST(DTypeConvert, OnlyFloatingPairsConvert) {
  EXPECT_TRUE(convertible(DType::kBF16, DType::kF8E4M3));
  EXPECT_TRUE(convertible(DType::kF8E5M2, DType::kF64));
  EXPECT_FALSE(convertible(DType::kBF16, DType::kBF16));
  for (DType bad : {DType::kBool, DType::kC64, DType::kI32, DType::kU8}) {
    EXPECT_FALSE(convertible(DType::kF32, bad)) << to_string(bad);
    EXPECT_FALSE(convertible(bad, DType::kF32)) << to_string(bad);
  }
  expect_error([] { require_convertible(DType::kF32, DType::kBool); }, ErrorKind::kInvalidArgument,
               "cannot convert f32 to bool");
  expect_error([] { require_convertible(DType::kC64, DType::kF32); }, ErrorKind::kInvalidArgument,
               "cannot convert c64 to f32");
}

using testing::layout;

TEST(ConvertingPlans, CarryThePricedTargetDtypeThroughJson) {
  const Layout src = layout("4", "S0", Dims{64, 32}), dst = layout("4", "S1", Dims{64, 32});
  const Plan plain = make_plan(src, dst, DType::kBF16);
  const Plan plan = make_converting_plan(src, dst, DType::kBF16, DType::kF8E4M3);
  EXPECT_TRUE(plan.converts());
  EXPECT_EQ(plan.target_dtype(), DType::kF8E4M3);
  EXPECT_EQ(plan.target_element_size(), 1);
  EXPECT_EQ(plan.steps().size(), plain.steps().size());
  EXPECT_EQ(plan.bytes_moved(), plain.bytes_moved());  // the wire carries source elements
  EXPECT_GT(plan.estimated_us(), plain.estimated_us());
  const std::string text = plan_to_json(plan);
  EXPECT_NE(text.find("\"to_dtype\": \"f8e4m3\""), std::string::npos) << text.substr(0, 400);
  const Plan loaded = plan_from_json(text);
  EXPECT_EQ(loaded.target_dtype(), DType::kF8E4M3);
  EXPECT_DOUBLE_EQ(loaded.estimated_us(), plan.estimated_us());
  EXPECT_EQ(plan_to_json(loaded), text);
  // Equal dtypes: no conversion, no field.
  const Plan same = make_converting_plan(src, dst, DType::kBF16, DType::kBF16);
  EXPECT_FALSE(same.converts());
  EXPECT_EQ(plan_to_json(same).find("to_dtype"), std::string::npos);
}

TEST(ConvertingPlans, RefuseBadPairsAndPartialTargets) {
  const Layout src = layout("2", "S0", Dims{8, 8}), dst = layout("2", "R", Dims{8, 8});
  expect_error([&] { make_converting_plan(src, dst, DType::kF32, DType::kI32); }, ErrorKind::kInvalidArgument,
               "cannot convert f32 to i32");
  expect_error([&] { make_converting_plan(src, dst, DType::kC64, DType::kF32); }, ErrorKind::kInvalidArgument,
               "cannot convert c64 to f32");
  expect_error(
      [&] {
        make_converting_plan(src, layout("2", "P", Dims{8, 8}), DType::kF32, DType::kBF16);
      },
      ErrorKind::kInvalidArgument, "Partial target");
  // The same from a file: a to_dtype the loader cannot take.
  std::string text = plan_to_json(make_converting_plan(src, dst, DType::kF32, DType::kBF16));
  const size_t at = text.find("\"to_dtype\": \"bf16\"");
  ASSERT_NE(at, std::string::npos);
  std::string bad = text;
  bad.replace(at, 18, "\"to_dtype\": \"bool\"");
  expect_error([&] { plan_from_json(bad); }, ErrorKind::kInvalidArgument, "cannot convert f32 to bool");
  bad = text;
  bad.replace(at, 18, "\"to_dtype\": \"f32\" ");
  expect_error([&] { plan_from_json(bad); }, ErrorKind::kInvalidArgument, "is the source dtype");
}

class ConvertingRuns : public ::testing::TestWithParam<testing::ConvertPair> {};

// Every case on every strategy and transport that plans it; every element of every rank checked.
TEST_P(ConvertingRuns, EveryLayoutEveryStrategyEveryElement) {
  testing::for_each_converting_plan(GetParam(), [](const Plan& plan, const std::string& what) {
    const RunResult r = run_plan(plan, testing::quick_host_run());
    EXPECT_EQ(r.wrong_elements, 0) << what << ": " << r.first_error;
    EXPECT_GT(r.checked_elements, 0) << what;
  });
}

INSTANTIATE_TEST_SUITE_P(Pairs, ConvertingRuns, ::testing::ValuesIn(testing::kConvertPairs), testing::pair_name);

// Rank-scoped plans run one rank each, as processes do; a plan from JSON runs as the one it came from.
TEST(ConvertingPlans, RankPlansAndLoadedPlansRun) {
  const Layout src = layout("4", "S0", Dims{9, 6}), dst = layout("4", "S1", Dims{9, 6});
  const Plan global = make_converting_plan(src, dst, DType::kBF16, DType::kF8E4M3);
  for (int r = 0; r < 4; ++r) {
    const Plan mine = make_converting_rank_plan(src, dst, DType::kBF16, DType::kF8E4M3, r);
    EXPECT_EQ(mine.target_dtype(), DType::kF8E4M3);
    EXPECT_EQ(lower(mine, r).output_dtype, DType::kF8E4M3);
    EXPECT_EQ(lower(mine, r).output_elements, lower(global, r).output_elements);
  }
  const RunResult r = run_plan(plan_from_json(plan_to_json(global)), testing::quick_host_run());
  EXPECT_EQ(r.wrong_elements, 0);
  EXPECT_GT(r.checked_elements, 0);
}

// A batch converts when every member converts one pair: every source mesh's cases as one batch, every element of
// every member on every rank checked.
TEST_P(ConvertingRuns, BatchesOfEveryLayout) {
  testing::for_each_converting_batch(GetParam(), [](const PlanBatch& batch, const std::string& what) {
    const RunResult r = run_batch(batch, testing::quick_host_run());
    EXPECT_EQ(r.wrong_elements, 0) << what << ": " << r.first_error;
    EXPECT_GT(r.checked_elements, 0) << what;
  });
}

// A batch mixing conversions (or a conversion and a plain move) is refused, naming the member; one pair is taken.
TEST(ConvertingPlans, BatchesConvertOnePair) {
  const Layout src = layout("2", "S0", Dims{4, 4}), dst = layout("2", "R", Dims{4, 4});
  const auto plain = std::make_shared<const Plan>(make_plan(src, dst, DType::kBF16));
  const auto to_f32 = std::make_shared<const Plan>(make_converting_plan(src, dst, DType::kBF16, DType::kF32));
  const auto to_f16 = std::make_shared<const Plan>(make_converting_plan(src, dst, DType::kBF16, DType::kF16));
  expect_error(
      [&] {
        PlanBatch({plain, to_f32});
      },
      ErrorKind::kInvalidArgument,
      "tensor 1 of the batch moves bf16 to f32, tensor 0 bf16 to bf16: a batch converts only when every "
      "member converts the same pair");
  expect_error(
      [&] {
        PlanBatch({to_f32, to_f16});
      },
      ErrorKind::kInvalidArgument, "tensor 1 of the batch moves bf16 to f16");
  const PlanBatch batch({to_f32, to_f32});
  EXPECT_TRUE(batch.converts());
  const RankProgram p = lower(batch, 0);
  EXPECT_EQ(p.dtype, DType::kBF16);
  EXPECT_EQ(p.output_dtype, DType::kF32);
  EXPECT_EQ(p.tensor_output_bytes, (std::vector<Index>{64, 64}));
  EXPECT_EQ(p.tensor_input_bytes, (std::vector<Index>{16, 16}));
}

// The CLI: --to-dtype on plan, run and bench; bad pairs exit 2 with one line.
TEST(ConvertingCli, PlanRunAndBenchTakeToDtype) {
  using testing::run_cli;
  const std::string layout = " --mesh 2 --from S0 --to S1 --shape 6x10 --dtype bf16";
  testing::CliResult r = run_cli("plan" + layout + " --to-dtype f8e4m3");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("dtype  bf16 -> f8e4m3"), std::string::npos) << r.out;
  r = run_cli("run --backend host --iters 1 --warmup 0" + layout + " --to-dtype f8e5m2");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  r = run_cli(
      "run --backend host --iters 1 --warmup 0 --mesh 2x2 --from P,S0 --to S1,R --shape 8x6 --dtype f32 "
      "--to-dtype bf16");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  r = run_cli(
      "bench --backend host --meshes 2 --shapes 8x8 --dtypes bf16,f32 --placements S0,R --iters 1 --warmup 0 "
      "--to-dtype f16");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string file = testing::temp_base() + "_convert.json";
  r = run_cli("plan" + layout + " --to-dtype f32 --json " + file);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_cli("run --backend host --iters 1 --warmup 0 --plan " + file);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  r = run_cli("run --backend host --plan " + file + " --to-dtype f16");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--to-dtype f32, not f16"), std::string::npos) << r.err;
  std::remove(file.c_str());
}

// Bad pairs exit 2 with one line; a converting batch runs, a batch mixing pairs exits 2 naming the tensor.
TEST(ConvertingCli, BadPairsExitTwoWithOneLine) {
  using testing::run_cli;
  const std::string layout = " --mesh 2 --from S0 --to R --shape 8x8";
  for (const char* args :
       {" --dtype f32 --to-dtype i32", " --dtype c64 --to-dtype f32", " --dtype bf16 --to-dtype bool"}) {
    const testing::CliResult r = run_cli(std::string("plan") + layout + args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_NE(r.err.find("cannot convert"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  testing::CliResult r = run_cli("plan --mesh 2 --from S0 --to P --shape 8x8 --dtype f32 --to-dtype bf16");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("Partial target"), std::string::npos) << r.err;
  // A batch converts one pair: every tensor to --to-dtype; a tensor already of that dtype is refused by name.
  r = run_cli("run --backend host --iters 1 --warmup 0 --batch 2" + layout + " --dtype f32 --to-dtype bf16");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("all correct"), std::string::npos) << r.out;
  r = run_cli("run --backend host --iters 1 --warmup 0 --batch 1 --tensor 4x4:S0:R:bf16" + layout +
              " --dtype f32 --to-dtype bf16");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("tensor 1 of the batch moves bf16 to bf16, tensor 0 f32 to bf16"), std::string::npos) << r.err;
  r = run_cli("bench --backend host --meshes 2 --shapes 8x8 --dtypes i32 --to-dtype f32");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("cannot convert i32 to f32"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace reshard
