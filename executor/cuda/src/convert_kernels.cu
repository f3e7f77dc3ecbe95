// The copy kernels of batches that convert the dtype (RankProgram::output_dtype): the batched copy and the fused
// one-sided step, one instance per (source, target) pair of dtype_convert.hpp's floating dtypes.
#include <type_traits>

#include "convert_visit.hpp"
#include "copy_tile.cuh"
#include "fused_sync.cuh"
#include "kernels.hpp"

namespace reshard::cuda {
namespace {

template <class From, class To, class Bases>
__global__ void __launch_bounds__(kThreads)
    converting_copy(const DeviceCopyRegion* regions, const DeviceCopyTile* tiles, int tile_count, Bases bases) {
  convert_tiles<From, To>(regions, tiles, tile_count, bases);
}

template <class Bases>
cudaError_t launch(DType from, DType to, const DeviceCopyRegion* regions, const DeviceCopyTile* tiles, int tile_count,
                   int max_blocks, const Bases& bases, cudaStream_t stream) {
  return visit_conversion(from, to, [&](auto a, auto b) {
    if (tile_count == 0) return cudaSuccess;
    const int blocks = max_blocks > 0 && tile_count > max_blocks ? max_blocks : tile_count;
    converting_copy<decltype(a), decltype(b), Bases>
        <<<blocks, kThreads, 0, stream>>>(regions, tiles, tile_count, bases);
    return cudaGetLastError();
  });
}

template <class From, class To>
__global__ void __launch_bounds__(kThreads, kFusedBlocksPerSm)
    converting_fused(const DeviceCopyRegion* regions, const DeviceCopyTile* tiles, int tile_count, DeviceBases bases,
                     FusedSync s) {
  fused_step(s, [&] { convert_tiles<From, To>(regions, tiles, tile_count, bases); });
}

}  // namespace

cudaError_t load_converting_kernels(DType from, DType to) {
  return visit_conversion(from, to, [&](auto a, auto b) {
    cudaFuncAttributes attributes{};
    cudaError_t e = cudaFuncGetAttributes(&attributes, converting_copy<decltype(a), decltype(b), DeviceWideBases>);
    return e != cudaSuccess ? e : cudaFuncGetAttributes(&attributes, converting_fused<decltype(a), decltype(b)>);
  });
}

cudaError_t launch_converting_copies(DType from, DType to, const DeviceCopyRegion* regions, const DeviceCopyTile* tiles,
                                     int tile_count, int max_blocks, const DeviceWideBases& bases,
                                     cudaStream_t stream) {
  return launch(from, to, regions, tiles, tile_count, max_blocks, bases, stream);
}

cudaError_t launch_converting_fused(DType from, DType to, const DeviceCopyRegion* regions, const DeviceCopyTile* tiles,
                                    int tile_count, int blocks, DeviceBases bases, const FusedSync& sync,
                                    cudaStream_t stream) {
  return visit_conversion(from, to, [&](auto a, auto b) {
    const int grid = blocks < 1 ? 1 : blocks;
    converting_fused<decltype(a), decltype(b)><<<grid, kThreads, 0, stream>>>(regions, tiles, tile_count, bases, sync);
    return cudaGetLastError();
  });
}

}  // namespace reshard::cuda
