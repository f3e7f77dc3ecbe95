// Block-scaled fp8 (block_scale.hpp): the host quantizer against the rule computed here from the global tensor, and
// which layouts carry block scales.
#include "reshard/block_scale.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "reshard/dtype_convert.hpp"
#include "reshard/error.hpp"

namespace reshard {
namespace {

// A global bf16 matrix with blocks of very different magnitudes, zero blocks and negative values.
std::vector<std::uint16_t> bf16_matrix(Index rows, Index cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<std::uint16_t> v(rows * cols);
  for (Index i = 0; i < rows; ++i)
    for (Index j = 0; j < cols; ++j) {
      const int magnitude = static_cast<int>((i / 3 + j / 5) % 7) - 3;
      const float x = (i / 4 + j / 4) % 5 == 4 ? 0.0f : u(rng) * std::ldexp(1.0f, 4 * magnitude);
      v[i * cols + j] = detail::cvt_float_to_bf16(x);
    }
  return v;
}

// The rule, written out over the global matrix: (codes, scales).
std::pair<std::vector<std::uint8_t>, std::vector<float>> expected(const std::vector<std::uint16_t>& x, Index rows,
                                                                  Index cols, Index block, DType to) {
  const Index gr = (rows + block - 1) / block, gc = (cols + block - 1) / block;
  const float largest = to == DType::kF8E4M3 ? 448.0f : 57344.0f;
  std::vector<float> scales(gr * gc);
  std::vector<std::uint8_t> codes(rows * cols);
  for (Index bi = 0; bi < gr; ++bi)
    for (Index bj = 0; bj < gc; ++bj) {
      float amax = 0;
      for (Index i = bi * block; i < std::min(rows, (bi + 1) * block); ++i)
        for (Index j = bj * block; j < std::min(cols, (bj + 1) * block); ++j)
          amax = std::max(amax, std::fabs(detail::cvt_bf16_to_float(x[i * cols + j])));
      float s = amax / largest;
      if (s == 0) s = 1;
      scales[bi * gc + bj] = s;
      for (Index i = bi * block; i < std::min(rows, (bi + 1) * block); ++i)
        for (Index j = bj * block; j < std::min(cols, (bj + 1) * block); ++j) {
          const float q = detail::cvt_bf16_to_float(x[i * cols + j]) / s;
          codes[i * cols + j] = to == DType::kF8E4M3 ? detail::cvt_float_to_f8e4m3(q) : detail::cvt_float_to_f8e5m2(q);
        }
    }
  return {codes, scales};
}

TEST(BlockScale, HostQuantizerFollowsTheRuleWithPartialEdgeBlocks) {
  for (DType to : {DType::kF8E4M3, DType::kF8E5M2})
    for (auto [rows, cols, block] : std::vector<std::tuple<Index, Index, Index>>{
             {128, 256, 128}, {300, 130, 128}, {7, 5, 4}, {64, 64, 16}, {1, 129, 128}}) {
      const auto x = bf16_matrix(rows, cols, static_cast<unsigned>(rows * 31 + cols));
      const auto [codes, scales] = expected(x, rows, cols, block, to);
      std::vector<std::uint8_t> out(rows * cols, 0xAB);
      std::vector<float> s(scales.size(), -1);
      quantize_blocks(x.data(), DType::kBF16, rows, cols, out.data(), to, s.data(), block);
      EXPECT_EQ(out, codes) << rows << "x" << cols << " block " << block << " " << to_string(to);
      EXPECT_EQ(s, scales) << rows << "x" << cols << " block " << block;
      // Every value comes back within the fp8 type's relative step of its block's scale (finite, no NaN), and each
      // block's largest element maps to the type's largest value.
      const float step = to == DType::kF8E4M3 ? 1.0f / 16 : 1.0f / 8;
      for (Index i = 0; i < rows; ++i)
        for (Index j = 0; j < cols; ++j) {
          const float v = detail::cvt_bf16_to_float(x[i * cols + j]);
          const float sc = s[(i / block) * ((cols + block - 1) / block) + j / block];
          const float back = (to == DType::kF8E4M3 ? detail::cvt_f8e4m3_to_float(out[i * cols + j])
                                                   : detail::cvt_f8e5m2_to_float(out[i * cols + j])) *
                             sc;
          ASSERT_TRUE(std::isfinite(back)) << i << "," << j;
          EXPECT_LE(std::fabs(back - v), std::fabs(v) * step + sc * 0.01f) << i << "," << j;
        }
    }
}

// A rank that holds whole blocks quantizes its part alone to exactly the global tensor's codes and scales there.
TEST(BlockScale, AlignedPartsQuantizeAsTheGlobalTensor) {
  const Index rows = 512, cols = 512, block = 128, grid_cols = cols / block;
  const auto x = bf16_matrix(rows, cols, 5);
  const auto [codes, scales] = expected(x, rows, cols, block, DType::kF8E4M3);
  const Layout data(Mesh({2, 2}), parse_placements("S0,S1"), Dims{rows, cols});
  ASSERT_EQ(block_misalignment(data, block), "");
  const Layout grid = scale_layout(data, block);
  for (int r = 0; r < 4; ++r) {
    const Box b = data.box(r), g = grid.box(r);
    std::vector<std::uint16_t> part(volume(b));
    for (Index i = 0; i < b.shape[0]; ++i)
      for (Index j = 0; j < b.shape[1]; ++j) part[i * b.shape[1] + j] = x[(b.offset[0] + i) * cols + b.offset[1] + j];
    std::vector<std::uint8_t> out(part.size());
    std::vector<float> s(volume(g));
    quantize_blocks(part.data(), DType::kBF16, b.shape[0], b.shape[1], out.data(), DType::kF8E4M3, s.data(), block);
    for (Index i = 0; i < b.shape[0]; ++i)
      for (Index j = 0; j < b.shape[1]; ++j)
        ASSERT_EQ(out[i * b.shape[1] + j], codes[(b.offset[0] + i) * cols + b.offset[1] + j]) << "rank " << r;
    for (Index i = 0; i < g.shape[0]; ++i)
      for (Index j = 0; j < g.shape[1]; ++j)
        ASSERT_EQ(s[i * g.shape[1] + j], scales[(g.offset[0] + i) * grid_cols + g.offset[1] + j]) << "rank " << r;
  }
}

TEST(BlockScale, WhichLayoutsCarryBlockScales) {
  auto why = [](std::vector<int> mesh, const char* placements, Index rows, Index cols, Index block = 128) {
    return block_misalignment(Layout(Mesh(mesh), parse_placements(placements), Dims{rows, cols}), block);
  };
  EXPECT_EQ(why({2}, "S0", 4096, 1024), "");       // FSDP: 2048 rows each
  EXPECT_EQ(why({4}, "S1", 4096, 14336), "");      // column-wise TP: 3584 columns each
  EXPECT_EQ(why({2}, "R", 300, 200), "");          // every rank holds the whole tensor, partial edge blocks too
  EXPECT_EQ(why({2, 2}, "S0,S0", 1024, 128), "");  // nested: 256 rows each
  EXPECT_EQ(why({2, 2}, "SS0/2,S0", 1024, 256), "");
  EXPECT_EQ(why({2}, "S0", 255, 256), "");  // rows 0-127 and 128-254: the last ends at the tensor's end
  EXPECT_EQ(why({3}, "S0", 4096, 128),
            "rank 0's rows end at 1366, neither a multiple of the block 128 nor the "
            "tensor's end 4096");
  EXPECT_EQ(why({2}, "S1", 128, 200),
            "rank 0's columns end at 100, neither a multiple of the block 128 nor the "
            "tensor's end 200");
  EXPECT_EQ(why({4}, "S0", 256, 128, 64), "");
  EXPECT_EQ(why({8}, "S0", 256, 128),
            "rank 0's rows end at 32, neither a multiple of the block 128 nor the tensor's "
            "end 256");
  EXPECT_THROW(why({2}, "S0", 8, 8, 0), Error);
  EXPECT_THROW(why({2}, "S0", 8, 8, kMaxScaleBlock + 1), Error);
  EXPECT_THROW(block_misalignment(Layout(Mesh({2}), parse_placements("S0"), Dims{8, 8, 8}), 4), Error);
}

TEST(BlockScale, RefusesPairsItDoesNotQuantize) {
  float s = 0;
  std::uint8_t out = 0;
  const float in = 1;
  EXPECT_THROW(quantize_blocks(&in, DType::kF32, 1, 1, &out, DType::kBF16, &s, 128), Error);
  EXPECT_THROW(quantize_blocks(&in, DType::kI32, 1, 1, &out, DType::kF8E4M3, &s, 128), Error);
  EXPECT_THROW(quantize_blocks(&in, DType::kF8E4M3, 1, 1, &out, DType::kF8E5M2, &s, 128), Error);
  quantize_blocks(&in, DType::kF32, 1, 1, &out, DType::kF8E4M3, &s, 128);
  EXPECT_EQ(s, 1.0f / 448);
  EXPECT_EQ(out, detail::cvt_float_to_f8e4m3(448));
}

}  // namespace
}  // namespace reshard
