// Block-scaled fp8 (the serving checkpoints of DeepSeek-V3 and its kind): a 2-D tensor quantized per square block of
// the global tensor, with one float32 scale per block delivered in a tensor of its own.
//
// The rule, for block size b, an fp8 target T (f8e4m3: largest finite 448; f8e5m2: 57344) and every block B of the
// global M x N tensor (rows [i*b, min((i+1)*b, M)), columns [j*b, min((j+1)*b, N)): the last row and column of blocks
// may be partial):
//   amax         = max over B of |float(x)|                     (a NaN in B makes it NaN)
//   scale_inv    = amax / max_T (float32 division); 1 where that is 0 (amax 0, or too small to divide)
//   q(x)         = T(float(x) / scale_inv)                      (float32 division, then dtype_convert.hpp's rounding)
// so that float(q) * scale_inv approximates x. In PyTorch, on the gathered tensor x (M and N padded to blocks):
//   s = x.float().abs().unflatten(0, (-1, b)).unflatten(2, (-1, b)).amax(dim=(1, 3)) / torch.tensor(max_T)
//   s[s == 0] = 1
//   q = (x.float() / s.repeat_interleave(b, 0)[:M].repeat_interleave(b, 1)[:, :N]).to(T)
// (divided by a tensor on the same device: PyTorch divides a CUDA tensor by a Python number as a product with the
// rounded reciprocal, which can differ in the last bit).
// The scale tensor has shape [ceil(M / b), ceil(N / b)] and is placed like the data: the same mesh and placements on
// that shape. A layout carries block scales only where that gives every rank exactly the blocks of its data
// (block_misalignment): its rows and columns start at a multiple of b and end at one or at the tensor's end, so a
// rank holding data holds whole blocks, and each rank's scales are computed from its own data.
#pragma once

#include <cstdint>
#include <string>

#include "reshard/detail/block_scale_math.hpp"
#include "reshard/dims.hpp"
#include "reshard/dtype.hpp"
#include "reshard/layout.hpp"

namespace reshard {

// The block size of DeepSeek-V3-style checkpoints (128 x 128).
inline constexpr Index kDefaultScaleBlock = 128;
// Blocks are at least this and at most kMaxScaleBlock elements on a side (a block's elements fit an int).
inline constexpr Index kMinScaleBlock = 1;
inline constexpr Index kMaxScaleBlock = 4096;

// Whether `to` is a type block scaling quantizes into (f8e4m3, f8e5m2), and whether `from` is one it quantizes from
// (f64, f32, f16, bf16).
bool block_scales_to(DType to);
bool block_scales_from(DType from);
// kInvalidArgument, one line naming the problem, unless from -> to is a block-scaled pair and block is within range.
void require_block_scaling(DType from, DType to, Index block);

// [ceil(rows / block), ceil(cols / block)] of a 2-D shape (kInvalidArgument for another rank).
Dims scale_grid_shape(const Dims& shape, Index block);
// The scale tensor's layout: `data`'s mesh and placements on scale_grid_shape(data's shape).
Layout scale_layout(const Layout& data, Index block);
// "" when `data` (2-D) carries block scales (the header's rule); otherwise one line naming the first rank and dim
// that breaks it, e.g. "rank 1's rows start at 2000, not a multiple of the block 128".
std::string block_misalignment(const Layout& data, Index block);

// Quantizes a dense row-major rows x cols matrix `in` of `from` whose blocks are the global tensor's (its first row
// and column start blocks) into `out` (rows x cols of `to`) and `scale_inv` (scale_grid_shape floats, row-major), by
// the header's rule. Host memory.
void quantize_blocks(const void* in, DType from, Index rows, Index cols, void* out, DType to, float* scale_inv,
                     Index block);

}  // namespace reshard
