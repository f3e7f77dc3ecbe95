// The reduction kernels' shared device code: one element type's loads and stores, and a block's reduction of one tile
// (internal to the CUDA backend; the batched and the fused reduction kernels).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "reduce_kernels.hpp"
#include "reshard/detail/reduce_math.hpp"

namespace reshard::cuda {

// Loads and stores one element of type T through its accumulator (reshard/detail/reduce_math.hpp).
template <class T>
struct DeviceElement {
  using acc = typename detail::Accumulator<T>::type;
  __device__ static acc load(const void* p, long long i) {
    if constexpr (std::is_same_v<T, Float16>) {
      return __half2float(static_cast<const __half*>(p)[i]);
    } else if constexpr (std::is_same_v<T, BFloat16>) {
      return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    } else {
      return static_cast<acc>(static_cast<const T*>(p)[i]);
    }
  }
  __device__ static void store(void* p, long long i, acc a) {
    if constexpr (std::is_same_v<T, Float16>) {
      static_cast<__half*>(p)[i] = __float2half_rn(a);
    } else if constexpr (std::is_same_v<T, BFloat16>) {
      static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(a);
    } else {
      static_cast<T*>(p)[i] = static_cast<T>(a);
    }
  }
};

// Reduces tile `t`: rows one after another (outer coordinates decoded once per row, no division per element) and
// threads striding along each row, so loads and stores coalesce. Each thread loads kUnroll elements of a source before
// it combines any of them: sources are often a peer's memory (a one-sided step's Partial contributions, read over
// NVLink), where a load takes a microsecond or two, and one load in flight per thread left a 2 MiB reduction at about
// 30 GB/s. Sources combine in their order (detail::combine), the same order as the host backend's.
template <class E, int kUnroll>
__device__ inline void reduce_tile(const DeviceReduceRegion& r, const DeviceReduceSource* sources,
                                   const DeviceReduceTile& t, const DeviceBases& bases) {
  using Acc = typename E::acc;
  void* dst = const_cast<void*>(bases.ptr[r.dst_buffer]);
  const int outer = r.ndim - 1;
  for (long long row = t.row_begin; row < t.row_end; ++row) {
    long long idx[kMaxReduceDims];
    long long rest = row;
    for (int d = outer - 1; d >= 0; --d) {
      idx[d] = rest % r.shape[d];
      rest /= r.shape[d];
    }
    long long drow = r.dst_offset;
    for (int d = 0; d < outer; ++d) drow += idx[d] * r.dst_stride[d];
    for (long long col0 = t.col_begin + threadIdx.x; col0 < t.col_end; col0 += kThreads * kUnroll) {
      Acc acc[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) acc[u] = Acc(0);
      for (int j = 0; j < r.src_count; ++j) {
        const DeviceReduceSource& s = sources[r.first_src + j];
        long long so = s.offset;
        for (int d = 0; d < outer; ++d) so += idx[d] * s.stride[d];
        const void* base = bases.ptr[s.buffer];
        Acc v[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const long long col = col0 + static_cast<long long>(u) * kThreads;
          v[u] = col < t.col_end ? E::load(base, so + col) : Acc(0);
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) acc[u] = j == 0 ? v[u] : detail::combine(acc[u], v[u], r.op);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const long long col = col0 + static_cast<long long>(u) * kThreads;
        if (col < t.col_end) E::store(dst, drow + col, r.src_count == 0 ? Acc(0) : detail::finish(acc[u], r.divisor));
      }
    }
  }
}

// Calls f(tag) for every dtype a reduction kernel runs as (tag::type its element type; complex64 is skipped, it runs
// as f32 pairs: detail::reduce_as); returns the first error (loading each dtype's kernel).
template <class F>
cudaError_t for_each_reducible(F&& f) {
  cudaError_t first = cudaSuccess;
  for (DType dtype : kAllDTypes) {
    const cudaError_t e = visit_dtype(dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_void_v<typename detail::Accumulator<T>::type>) {
        return cudaSuccess;
      } else {
        return f(tag);
      }
    });
    if (first == cudaSuccess) first = e;
  }
  return first;
}

// Calls f(tag) with tag::type the element type a reduction over `dtype` runs as; cudaErrorInvalidValue for a dtype
// that is not reducible as itself (complex64 runs as f32 pairs: detail::reduce_as).
template <class F>
cudaError_t visit_reducible(DType dtype, F&& f) {
  return visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_void_v<typename detail::Accumulator<T>::type>) {
      return cudaErrorInvalidValue;
    } else {
      return f(tag);
    }
  });
}

}  // namespace reshard::cuda
