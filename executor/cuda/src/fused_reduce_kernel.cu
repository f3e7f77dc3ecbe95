// The fused one-sided step that reduces (a step from a Partial source): flags and the reduction of every region from
// its contributors' memory in one kernel per rank per call (small redistributions).
#include "fused_sync.cuh"
#include "reduce_tile.cuh"

namespace reshard::cuda {
namespace {

// Loads of a source in flight per thread before combining: 8 for elements of up to 4 bytes, 4 for 8-byte ones. The
// fused kernels keep 4 blocks resident per SM (64 registers a thread, kFusedBlocksPerSm), and 8 loads of an 8-byte
// type spilled there (ptxas -v, sm_90, CUDA 13.0); 4 loads of a 2-byte type kept only 8 bytes a thread in flight.
template <class T>
constexpr int kFusedUnroll = sizeof(T) <= 4 ? 8 : 4;

template <class T>
__global__ void __launch_bounds__(kThreads, kFusedBlocksPerSm)
    fused_reduce(const DeviceReduceRegion* regions, const DeviceReduceSource* sources, const DeviceReduceTile* tiles,
                 int tile_count, DeviceBases bases, FusedSync s) {
  fused_step(s, [&] {
    for (int ti = blockIdx.x; ti < tile_count; ti += gridDim.x) {
      const DeviceReduceTile t = tiles[ti];
      reduce_tile<DeviceElement<T>, kFusedUnroll<T>>(regions[t.region], sources, t, bases);
    }
  });
}

}  // namespace

cudaError_t load_fused_reduce_kernels() {
  return for_each_reducible([](auto tag) {
    cudaFuncAttributes attributes{};
    return cudaFuncGetAttributes(&attributes, fused_reduce<typename decltype(tag)::type>);
  });
}

cudaError_t launch_fused_reductions(const DeviceReduceRegion* regions, const DeviceReduceSource* sources,
                                    const DeviceReduceTile* tiles, int tile_count, int blocks, DType dtype,
                                    DeviceBases bases, const FusedSync& sync, cudaStream_t stream) {
  return visit_reducible(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int grid = blocks < 1 ? 1 : blocks;
    fused_reduce<T><<<grid, kThreads, 0, stream>>>(regions, sources, tiles, tile_count, bases, sync);
    return cudaGetLastError();
  });
}

}  // namespace reshard::cuda
