// The fused one-sided step that copies: flags and copies in one kernel per rank per call (small redistributions).
#include "copy_tile.cuh"
#include "fused_sync.cuh"
#include "kernels.hpp"

namespace reshard::cuda {
namespace {

__global__ void __launch_bounds__(kThreads, kFusedBlocksPerSm)
    fused_copy(const DeviceCopyRegion* regions, const DeviceCopyTile* tiles, int tile_count, DeviceBases bases,
               FusedSync s) {
  fused_step(s, [&] { copy_tiles(regions, tiles, tile_count, bases); });
}

}  // namespace

cudaError_t load_fused_kernel() {
  cudaFuncAttributes attributes{};
  return cudaFuncGetAttributes(&attributes, fused_copy);
}

cudaError_t launch_fused(const DeviceCopyRegion* regions, const DeviceCopyTile* tiles, int tile_count, int blocks,
                         DeviceBases bases, const FusedSync& sync, cudaStream_t stream) {
  const int grid = blocks < 1 ? 1 : blocks;
  fused_copy<<<grid, kThreads, 0, stream>>>(regions, tiles, tile_count, bases, sync);
  return cudaGetLastError();
}

}  // namespace reshard::cuda
