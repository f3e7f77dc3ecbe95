#include "reshard/block_scale.hpp"

#include <algorithm>
#include <vector>

#include "reshard/checked_math.hpp"
#include "reshard/dtype_convert.hpp"
#include "reshard/error.hpp"
#include "reshard/rank_boxes.hpp"

namespace reshard {
namespace {

Index blocks_over(Index n, Index block) { return n / block + (n % block != 0 ? 1 : 0); }

template <class From, class To>
void quantize_typed(const From* in, Index rows, Index cols, To* out, float* scale_inv, Index block, float largest) {
  const Index grid_cols = blocks_over(cols, block);
  for (Index i0 = 0; i0 < rows; i0 += block) {
    const Index i1 = std::min(rows, i0 + block);
    for (Index j0 = 0; j0 < cols; j0 += block) {
      const Index j1 = std::min(cols, j0 + block);
      float amax = 0;
      for (Index i = i0; i < i1; ++i)
        for (Index j = j0; j < j1; ++j) amax = detail::amax_step(amax, detail::cvt_to_float(in[i * cols + j]));
      const float s = detail::scale_inv_of(amax, largest);
      scale_inv[(i0 / block) * grid_cols + j0 / block] = s;
      for (Index i = i0; i < i1; ++i)
        for (Index j = j0; j < j1; ++j)
          out[i * cols + j] = detail::cvt_from_float<To>(detail::cvt_to_float(in[i * cols + j]) / s);
    }
  }
}

// The first boundary of `b` along dim d (0 rows, 1 columns) that is not a block boundary, as text; "" if none.
std::string misaligned_end(const Box& b, int d, Index extent, Index block, int rank) {
  const char* what = d == 0 ? "rows" : "columns";
  if (b.offset[d] % block != 0)
    return cat("rank ", rank, "'s ", what, " start at ", b.offset[d], ", not a multiple of the block ", block);
  const Index end = b.offset[d] + b.shape[d];
  if (end != extent && end % block != 0)
    return cat("rank ", rank, "'s ", what, " end at ", end, ", neither a multiple of the block ", block,
               " nor the tensor's end ", extent);
  return "";
}

}  // namespace

bool block_scales_to(DType to) { return to == DType::kF8E4M3 || to == DType::kF8E5M2; }

bool block_scales_from(DType from) {
  return from == DType::kF64 || from == DType::kF32 || from == DType::kF16 || from == DType::kBF16;
}

void require_block_scaling(DType from, DType to, Index block) {
  RESHARD_REQUIRE(block_scales_to(to), "block scaling quantizes into f8e4m3 or f8e5m2, not ", to_string(to));
  RESHARD_REQUIRE(block_scales_from(from), "block scaling quantizes f64, f32, f16 or bf16, not ", to_string(from));
  RESHARD_REQUIRE(block >= kMinScaleBlock && block <= kMaxScaleBlock, "the scale block must be ", kMinScaleBlock,
                  " to ", kMaxScaleBlock, " elements on a side, got ", block);
}

Dims scale_grid_shape(const Dims& shape, Index block) {
  RESHARD_REQUIRE(shape.size() == 2, "block scaling applies to 2-D tensors, not to shape ", to_string(shape));
  RESHARD_REQUIRE(block >= kMinScaleBlock && block <= kMaxScaleBlock, "the scale block must be ", kMinScaleBlock,
                  " to ", kMaxScaleBlock, " elements on a side, got ", block);
  return Dims{blocks_over(shape[0], block), blocks_over(shape[1], block)};
}

Layout scale_layout(const Layout& data, Index block) {
  return Layout(data.mesh(), data.placements(), scale_grid_shape(data.global_shape(), block));
}

std::string block_misalignment(const Layout& data, Index block) {
  const Layout grid = scale_layout(data, block);
  if (!data.one_box_per_rank())
    return cat("placements ", to_string(data.placements()), " give a rank more than one block of rows or columns");
  const Dims& shape = data.global_shape();
  for (int r : data.mesh().ranks()) {
    const Box b = data.box(r);
    if (volume(b) == 0) {
      if (volume(grid.box(r)) != 0) return cat("rank ", r, " holds no data but would hold scales");
      continue;
    }
    for (int d = 0; d < 2; ++d)
      if (std::string why = misaligned_end(b, d, shape[d], block, r); !why.empty()) return why;
    const Box want{Dims{b.offset[0] / block, b.offset[1] / block},
                   Dims{blocks_over(b.shape[0], block), blocks_over(b.shape[1], block)}};
    if (!(grid.box(r) == want))
      return cat("the scale grid placed as the data gives rank ", r, " other blocks than its data's (placements ",
                 to_string(data.placements()), " on ", to_string(shape), ")");
  }
  return "";
}

void quantize_blocks(const void* in, DType from, Index rows, Index cols, void* out, DType to, float* scale_inv,
                     Index block) {
  require_block_scaling(from, to, block);
  RESHARD_REQUIRE(rows >= 0 && cols >= 0, "quantize_blocks: negative shape ", rows, "x", cols);
  checked_mul(rows, cols, "the quantized matrix's elements");
  const float largest = detail::fp8_largest(to);
  visit_dtype(from, [&](auto f) {
    using From = typename decltype(f)::type;
    visit_dtype(to, [&](auto t) {
      using To = typename decltype(t)::type;
      if constexpr (detail::kBlockScaledFrom<From> && detail::kBlockScaledTo<To>)
        quantize_typed(static_cast<const From*>(in), rows, cols, static_cast<To*>(out), scale_inv, block, largest);
    });
  });
}

}  // namespace reshard
