// Batched reduction kernel: the receivers' side of a p2p step from a Partial source, and the partition of a
// replicated value into Partial(sum). Arithmetic from reshard/detail/reduce_math.hpp (the host backend's too).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "reduce_kernels.hpp"
#include "reshard/detail/reduce_math.hpp"

namespace reshard::cuda {
namespace {

constexpr int kThreads = 256;

template <class T, class Acc>
struct Plain {
  using acc = Acc;
  __device__ static Acc load(const void* p, long long i) { return static_cast<Acc>(static_cast<const T*>(p)[i]); }
  __device__ static void store(void* p, long long i, Acc a) { static_cast<T*>(p)[i] = static_cast<T>(a); }
};

struct F16 {
  using acc = float;
  __device__ static float load(const void* p, long long i) { return __half2float(static_cast<const __half*>(p)[i]); }
  __device__ static void store(void* p, long long i, float a) { static_cast<__half*>(p)[i] = __float2half_rn(a); }
};

struct BF16 {
  using acc = float;
  __device__ static float load(const void* p, long long i) {
    return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  }
  __device__ static void store(void* p, long long i, float a) {
    static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(a);
  }
};

// Blocks walk tiles grid-stride; within a tile, rows one after another (outer coordinates decoded once per row,
// no division per element) and threads stride along each row, so loads and stores coalesce.
template <class E>
__global__ void __launch_bounds__(kThreads)
    batched_reduce(const DeviceReduceRegion* regions, const DeviceReduceSource* sources, const DeviceReduceTile* tiles,
                   int tile_count, DeviceBases bases) {
  using Acc = typename E::acc;
  for (int ti = blockIdx.x; ti < tile_count; ti += gridDim.x) {
    const DeviceReduceTile t = tiles[ti];
    const DeviceReduceRegion& r = regions[t.region];
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
      for (long long col = t.col_begin + threadIdx.x; col < t.col_end; col += kThreads) {
        Acc acc = Acc(0);
        for (int j = 0; j < r.src_count; ++j) {
          const DeviceReduceSource& s = sources[r.first_src + j];
          long long so = s.offset + col;
          for (int d = 0; d < outer; ++d) so += idx[d] * s.stride[d];
          Acc v = E::load(bases.ptr[s.buffer], so);
          acc = j == 0 ? v : detail::combine(acc, v, r.op);
        }
        E::store(dst, drow + col, r.src_count == 0 ? Acc(0) : detail::finish(acc, r.divisor));
      }
    }
  }
}

template <class E>
cudaError_t launch(const DeviceReduceRegion* regions, const DeviceReduceSource* sources, const DeviceReduceTile* tiles,
                   int tile_count, DeviceBases bases, cudaStream_t stream) {
  int blocks = tile_count < 65535 ? tile_count : 65535;
  batched_reduce<E><<<blocks, kThreads, 0, stream>>>(regions, sources, tiles, tile_count, bases);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_reductions(const DeviceReduceRegion* regions, const DeviceReduceSource* sources,
                              const DeviceReduceTile* tiles, int tile_count, int dtype_code, DeviceBases bases,
                              cudaStream_t stream) {
  if (tile_count == 0) return cudaSuccess;
  switch (dtype_code) {  // DType's order: f64 f32 f16 bf16 i64 i32 i8 u8
    case 0:
      return launch<Plain<double, double>>(regions, sources, tiles, tile_count, bases, stream);
    case 1:
      return launch<Plain<float, float>>(regions, sources, tiles, tile_count, bases, stream);
    case 2:
      return launch<F16>(regions, sources, tiles, tile_count, bases, stream);
    case 3:
      return launch<BF16>(regions, sources, tiles, tile_count, bases, stream);
    case 4:
      return launch<Plain<long long, long long>>(regions, sources, tiles, tile_count, bases, stream);
    case 5:
      return launch<Plain<int, long long>>(regions, sources, tiles, tile_count, bases, stream);
    case 6:
      return launch<Plain<signed char, long long>>(regions, sources, tiles, tile_count, bases, stream);
    case 7:
      return launch<Plain<unsigned char, long long>>(regions, sources, tiles, tile_count, bases, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace reshard::cuda
