// The block-scaled fp8 kernel (block_scale_cuda.hpp): one thread block per block of the matrix, its warps over the
// block's rows; it reads its block once for the maximum and again (from L2) to quantize.
#include "kernels.hpp"
#include "reshard/detail/block_scale_math.hpp"
#include "reshard/dtype_convert.hpp"

namespace reshard::cuda {
namespace {

constexpr int kQuantizeThreads = 256;
constexpr int kWarps = kQuantizeThreads / 32;

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
  for (int off = 16; off > 0; off >>= 1) m = detail::amax_join(m, __shfl_xor_sync(0xffffffffu, m, off));
  __shared__ float warp_max[kWarps];
  __shared__ float scale;
  if (lane == 0) warp_max[warp] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0;
    for (int k = 0; k < kWarps; ++k) t = detail::amax_join(t, warp_max[k]);
    scale = detail::scale_inv_of(t, largest);
    scale_inv[tile] = scale;
  }
  __syncthreads();
  const float s = scale;
  for (int i = warp; i < h; i += kWarps) {
    const From* row = in + (i0 + i) * cols + j0;
    To* dst = out + (i0 + i) * cols + j0;
    for (int j = lane; j < w; j += 32) dst[j] = detail::cvt_from_float<To>(detail::cvt_to_float(row[j]) / s);
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
