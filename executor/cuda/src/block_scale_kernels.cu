// The block-scaled fp8 kernels (block_scale_cuda.hpp): one thread block per block of the matrix. Full 128 x 128 blocks
// of aligned 2- and 4-byte sources read their block once into registers; any other block is read by warps over its
// rows, once for the maximum and again (from L2) to quantize.
#include <cuda_fp8.h>

#include <type_traits>

#include "kernels.hpp"
#include "reshard/detail/block_scale_math.hpp"
#include "reshard/dtype_convert.hpp"

namespace reshard::cuda {
namespace {

constexpr int kQuantizeThreads = 256;
constexpr int kWarps = kQuantizeThreads / 32;

// One quantized value as `To`: the conversion instruction where the GPU has one (sm_89 and later: round to nearest
// even, saturating to the largest finite value, which a quantized value never exceeds by a rounding step: it equals
// dtype_convert.hpp's software rounding there), the software rounding elsewhere.
template <class To>
__device__ inline To encode_quantized(float v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  constexpr __nv_fp8_interpretation_t kind = std::is_same<To, Float8E4M3>::value ? __NV_E4M3 : __NV_E5M2;
  return To{static_cast<std::uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, kind))};
#else
  return detail::cvt_from_float<To>(v);
#endif
}

// The block's scale from every thread's partial maximum `m` (all threads of the block call it): written to
// scale_inv[tile] by thread 0 and returned to every thread.
__device__ inline float block_scale(float m, float* scale_inv, long long tile, float largest) {
  for (int off = 16; off > 0; off >>= 1) m = detail::amax_join(m, __shfl_xor_sync(0xffffffffu, m, off));
  __shared__ float warp_max[kWarps];
  __shared__ float scale;
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0;
    for (int k = 0; k < kWarps; ++k) t = detail::amax_join(t, warp_max[k]);
    scale = detail::scale_inv_of(t, largest);
    scale_inv[tile] = scale;
  }
  __syncthreads();
  return scale;
}

template <class From, class To>
__global__ void __launch_bounds__(kQuantizeThreads)
    quantize_kernel(const From* __restrict__ in, long long rows, long long cols, To* __restrict__ out,
                    float* __restrict__ scale_inv, int block, long long grid_cols, float largest) {
  const long long tile = blockIdx.x;
  const long long i0 = tile / grid_cols * block, j0 = tile % grid_cols * block;
  const int h = static_cast<int>(rows - i0 < block ? rows - i0 : block);
  const int w = static_cast<int>(cols - j0 < block ? cols - j0 : block);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float m = 0;
  for (int i = warp; i < h; i += kWarps) {
    const From* row = in + (i0 + i) * cols + j0;
    for (int j = lane; j < w; j += 32) m = detail::amax_step(m, detail::cvt_to_float(row[j]));
  }
  const float s = block_scale(m, scale_inv, tile, largest);
  for (int i = warp; i < h; i += kWarps) {
    const From* row = in + (i0 + i) * cols + j0;
    To* dst = out + (i0 + i) * cols + j0;
    for (int j = lane; j < w; j += 32) dst[j] = encode_quantized<To>(detail::cvt_to_float(row[j]) / s);
  }
}

// Full 128 x 128 blocks of 2- and 4-byte sources, rows 16-byte aligned: every thread loads its 64 elements once, in
// 16-byte vectors, keeps them in registers for the maximum and quantizes them from there (one read of the source, one
// write of the codes, both vectorised).
template <class From, class To>
__global__ void __launch_bounds__(kQuantizeThreads)
    quantize_full_blocks(const From* __restrict__ in, long long cols, To* __restrict__ out,
                         float* __restrict__ scale_inv, long long grid_cols, float largest) {
  constexpr int kBlock = 128;
  constexpr int kVec = 16 / sizeof(From);      // elements per 16-byte load
  constexpr int kLanesPerRow = kBlock / kVec;  // threads across one row of the block
  constexpr int kRowsPerPass = kQuantizeThreads / kLanesPerRow;
  constexpr int kPasses = kBlock / kRowsPerPass;
  static_assert(sizeof(To) == 1 && kPasses * kRowsPerPass == kBlock, "full-block quantization: 1-byte codes");
  const long long tile = blockIdx.x;
  const long long i0 = tile / grid_cols * kBlock, j0 = tile % grid_cols * kBlock;
  const int col = (threadIdx.x % kLanesPerRow) * kVec, row = threadIdx.x / kLanesPerRow;
  uint4 v[kPasses];
  float m = 0;
#pragma unroll
  for (int p = 0; p < kPasses; ++p) {
    v[p] = __ldg(reinterpret_cast<const uint4*>(in + (i0 + row + p * kRowsPerPass) * cols + j0 + col));
    const From* e = reinterpret_cast<const From*>(&v[p]);
#pragma unroll
    for (int k = 0; k < kVec; ++k) m = detail::amax_step(m, detail::cvt_to_float(e[k]));
  }
  const float s = block_scale(m, scale_inv, tile, largest);
#pragma unroll
  for (int p = 0; p < kPasses; ++p) {
    const From* e = reinterpret_cast<const From*>(&v[p]);
    union {
      To codes[kVec];
      typename std::conditional<kVec == 8, uint2, unsigned>::type word;
    } o;
#pragma unroll
    for (int k = 0; k < kVec; ++k) o.codes[k] = encode_quantized<To>(detail::cvt_to_float(e[k]) / s);
    *reinterpret_cast<decltype(o.word)*>(out + (i0 + row + p * kRowsPerPass) * cols + j0 + col) = o.word;
  }
}

}  // namespace

cudaError_t launch_quantize_blocks(const void* in, DType from, long long rows, long long cols, void* out, DType to,
                                   float* scale_inv, int block, long long grid_cols, unsigned tiles,
                                   cudaStream_t stream) {
  const float largest = detail::fp8_largest(to);
  return visit_dtype(from, [&](auto f) {
    using From = typename decltype(f)::type;
    return visit_dtype(to, [&](auto t) -> cudaError_t {
      using To = typename decltype(t)::type;
      if constexpr (detail::kBlockScaledFrom<From> && detail::kBlockScaledTo<To>) {
        if constexpr (sizeof(From) <= 4) {
          const bool aligned =
              reinterpret_cast<unsigned long long>(in) % 16 == 0 && reinterpret_cast<unsigned long long>(out) % 16 == 0;
          if (block == 128 && rows % 128 == 0 && cols % 128 == 0 && aligned) {
            quantize_full_blocks<From, To><<<tiles, kQuantizeThreads, 0, stream>>>(
                static_cast<const From*>(in), cols, static_cast<To*>(out), scale_inv, grid_cols, largest);
            return cudaGetLastError();
          }
        }
        quantize_kernel<From, To><<<tiles, kQuantizeThreads, 0, stream>>>(
            static_cast<const From*>(in), rows, cols, static_cast<To*>(out), scale_inv, block, grid_cols, largest);
        return cudaGetLastError();
      } else {
        return cudaErrorInvalidValue;
      }
    });
  });
}

}  // namespace reshard::cuda
