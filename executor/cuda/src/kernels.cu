// Batched copy kernel (pack, unpack and local copies of a step in one launch).
#include "copy_tile.cuh"
#include "kernels.hpp"

namespace reshard::cuda {
namespace {

// Each block walks tiles grid-stride, so the grid can stay small enough to leave SMs to concurrent NCCL kernels.
template <class Bases>
__global__ void __launch_bounds__(kThreads)
    batched_copy(const DeviceCopyRegion* regions, const DeviceCopyTile* tiles, int tile_count, Bases bases) {
  copy_tiles(regions, tiles, tile_count, bases);
}

template <class Bases>
cudaError_t launch(const DeviceCopyRegion* regions, const DeviceCopyTile* tiles, int tile_count, int max_blocks,
                   const Bases& bases, cudaStream_t stream) {
  if (tile_count == 0) return cudaSuccess;
  int blocks = max_blocks > 0 && tile_count > max_blocks ? max_blocks : tile_count;
  batched_copy<Bases><<<blocks, kThreads, 0, stream>>>(regions, tiles, tile_count, bases);
  return cudaGetLastError();
}

}  // namespace

cudaError_t load_fused_kernel();  // fused_kernel.cu

cudaError_t load_copy_kernels() {
  cudaFuncAttributes attributes{};
  cudaError_t e = cudaFuncGetAttributes(&attributes, batched_copy<DeviceBases>);
  if (e == cudaSuccess) e = cudaFuncGetAttributes(&attributes, batched_copy<DeviceWideBases>);
  return e != cudaSuccess ? e : load_fused_kernel();
}

cudaError_t launch_copies(const DeviceCopyRegion* regions, const DeviceCopyTile* tiles, int tile_count, int max_blocks,
                          const DeviceBases& bases, cudaStream_t stream) {
  return launch(regions, tiles, tile_count, max_blocks, bases, stream);
}

cudaError_t launch_copies(const DeviceCopyRegion* regions, const DeviceCopyTile* tiles, int tile_count, int max_blocks,
                          const DeviceWideBases& bases, cudaStream_t stream) {
  return launch(regions, tiles, tile_count, max_blocks, bases, stream);
}

}  // namespace reshard::cuda
