// Batched reduction kernel: the receivers' side of a p2p step from a Partial source, and the partition of a
// replicated value into Partial(sum). Arithmetic from reshard/detail/reduce_math.hpp (the host backend's too).
#include "reduce_kernels.hpp"
#include "reduce_tile.cuh"

namespace reshard::cuda {
namespace {

// Blocks walk tiles grid-stride (reduce_tile.cuh). The launch bound asks for two resident blocks per SM (up to 128
// registers a thread): without it ptxas kept the 4-byte types at 48 registers and spilled the unrolled loop.
constexpr int kUnroll = 8;

template <class E>
__global__ void __launch_bounds__(kThreads, 2)
    batched_reduce(const DeviceReduceRegion* regions, const DeviceReduceSource* sources, const DeviceReduceTile* tiles,
                   int tile_count, DeviceBases bases) {
  for (int ti = blockIdx.x; ti < tile_count; ti += gridDim.x) {
    const DeviceReduceTile t = tiles[ti];
    reduce_tile<E, kUnroll>(regions[t.region], sources, t, bases);
  }
}

}  // namespace

cudaError_t load_reduce_kernels() {
  return for_each_reducible([](auto tag) {
    cudaFuncAttributes attributes{};
    return cudaFuncGetAttributes(&attributes, batched_reduce<DeviceElement<typename decltype(tag)::type>>);
  });
}

cudaError_t launch_reductions(const DeviceReduceRegion* regions, const DeviceReduceSource* sources,
                              const DeviceReduceTile* tiles, int tile_count, DType dtype, DeviceBases bases,
                              cudaStream_t stream) {
  if (tile_count == 0) return cudaSuccess;
  return visit_reducible(dtype, [&](auto tag) {
    using E = DeviceElement<typename decltype(tag)::type>;
    const int blocks = tile_count < 65535 ? tile_count : 65535;
    batched_reduce<E><<<blocks, kThreads, 0, stream>>>(regions, sources, tiles, tile_count, bases);
    return cudaGetLastError();
  });
}

}  // namespace reshard::cuda
