// The reduction kernels of batches that convert the dtype (RankProgram::output_dtype): batched and fused, one instance
// per (reducible floating source, floating target) pair. Every region of such a batch writes an output buffer (marked
// `convert`; cuda_reduce.cpp checks): it reduces in the source dtype, rounds to it, then stores the value converted
// (reshard/dtype_convert.hpp), the value PyTorch's full_tensor().to() gives.
#include <type_traits>

#include "convert_visit.hpp"
#include "fused_sync.cuh"
#include "reduce_kernels.hpp"
#include "reduce_tile.cuh"
#include "reshard/dtype_convert.hpp"

namespace reshard::cuda {
namespace {

constexpr int kUnroll = 8;       // as the batched kernel (reduce_kernels.cu)
constexpr int kFusedUnroll = 4;  // within the fused kernels' 64 registers a thread for every element size

// Loads as DeviceElement<T>; stores the result rounded to T, then converted to To.
template <class T, class To>
struct ConvertingElement {
  using acc = typename DeviceElement<T>::acc;
  __device__ static acc load(const void* p, long long i) { return DeviceElement<T>::load(p, i); }
  __device__ static void store(void* p, long long i, acc a) {
    T rounded;
    DeviceElement<T>::store(&rounded, 0, a);
    static_cast<To*>(p)[i] = detail::convert_value<T, To>(rounded);
  }
};

template <int kU, class T, class To>
__device__ inline void reduce_tiles(const DeviceReduceRegion* regions, const DeviceReduceSource* sources,
                                    const DeviceReduceTile* tiles, int tile_count, const DeviceBases& bases) {
  for (int ti = blockIdx.x; ti < tile_count; ti += gridDim.x) {
    const DeviceReduceTile t = tiles[ti];
    reduce_tile<ConvertingElement<T, To>, kU>(regions[t.region], sources, t, bases);
  }
}

template <class T, class To>
__global__ void __launch_bounds__(kThreads, 2)
    converting_reduce(const DeviceReduceRegion* regions, const DeviceReduceSource* sources,
                      const DeviceReduceTile* tiles, int tile_count, DeviceBases bases) {
  reduce_tiles<kUnroll, T, To>(regions, sources, tiles, tile_count, bases);
}

template <class T, class To>
__global__ void __launch_bounds__(kThreads, kFusedBlocksPerSm)
    converting_fused_reduce(const DeviceReduceRegion* regions, const DeviceReduceSource* sources,
                            const DeviceReduceTile* tiles, int tile_count, DeviceBases bases, FusedSync s) {
  fused_step(s, [&] { reduce_tiles<kFusedUnroll, T, To>(regions, sources, tiles, tile_count, bases); });
}

// Element types a reduction accumulates (the reducible floating types).
template <class T>
struct Reducible : std::bool_constant<!std::is_void_v<typename detail::Accumulator<T>::type>> {};

}  // namespace

cudaError_t load_converting_reductions(DType from, DType to) {
  return visit_conversion<Reducible>(from, to, [](auto a, auto b) {
    cudaFuncAttributes attributes{};
    cudaError_t e = cudaFuncGetAttributes(&attributes, converting_reduce<decltype(a), decltype(b)>);
    return e != cudaSuccess ? e : cudaFuncGetAttributes(&attributes, converting_fused_reduce<decltype(a), decltype(b)>);
  });
}

cudaError_t launch_converting_reductions(DType from, DType to, const DeviceReduceRegion* regions,
                                         const DeviceReduceSource* sources, const DeviceReduceTile* tiles,
                                         int tile_count, DeviceBases bases, cudaStream_t stream) {
  if (tile_count == 0) return cudaSuccess;
  return visit_conversion<Reducible>(from, to, [&](auto a, auto b) {
    const int blocks = tile_count < 65535 ? tile_count : 65535;
    converting_reduce<decltype(a), decltype(b)>
        <<<blocks, kThreads, 0, stream>>>(regions, sources, tiles, tile_count, bases);
    return cudaGetLastError();
  });
}

cudaError_t launch_converting_fused_reductions(DType from, DType to, const DeviceReduceRegion* regions,
                                               const DeviceReduceSource* sources, const DeviceReduceTile* tiles,
                                               int tile_count, int blocks, DeviceBases bases, const FusedSync& sync,
                                               cudaStream_t stream) {
  return visit_conversion<Reducible>(from, to, [&](auto a, auto b) {
    const int grid = blocks < 1 ? 1 : blocks;
    auto* kernel = converting_fused_reduce<decltype(a), decltype(b)>;
    kernel<<<grid, kThreads, 0, stream>>>(regions, sources, tiles, tile_count, bases, sync);
    return cudaGetLastError();
  });
}

}  // namespace reshard::cuda
