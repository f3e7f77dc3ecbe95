// The fused one-sided steps' batches: tiles sized so that a small step spreads over the SMs, a call counter on the
// device, one launch per run.
#include "fused_batches.hpp"

#include <algorithm>

#include "copy_batches.hpp"
#include "reduce_tiles.hpp"
#include "reshard/cuda_check.hpp"

namespace reshard::cuda {
namespace {

// A fused step's tile: the smallest power of two from `smallest` to `largest` that makes at most one tile per SM where
// the step allows (a block, one per SM, then walks one tile: each tile costs a round trip to the peer), so that small
// steps spread their blocks over the SMs instead of leaving most of the GPU idle. Copies count bytes from 2 KiB to
// 64 KiB (a 16 KiB tile is one round of a block's loads, copy_tile.cuh); reductions count elements of the dtype the
// kernel runs from 2K (one round of a block's loads of a source for types of up to 4 bytes, kFusedUnroll in
// fused_reduce_kernel.cu) to the batched kernel's 4K.
long long tile_for(long long total, long long smallest, long long largest, int sm_count) {
  long long tile = smallest;
  while (tile < largest && (total + tile - 1) / tile > sm_count) tile *= 2;
  return tile;
}

long long copy_tile_bytes(const std::vector<CopyRegion>& regions, int es, int sm_count) {
  long long total = 0;
  for (const CopyRegion& r : regions) total += r.shape.product() * es;
  return tile_for(total, 2048, 64 * 1024, sm_count);
}

long long reduce_tile_elements(const std::vector<ReduceRegion>& regions, DType dtype, int sm_count) {
  long long total = 0;
  for (const ReduceRegion& r : regions) total += r.shape.product() * detail::reduce_as(dtype).lanes;
  return tile_for(total, 2048, kReduceTileElements, sm_count);
}

// What every fused batch holds beside its tiles: the step's flags with its call counter on the device ([0] calls
// completed, [1] blocks finished in the current call), and its grid (a block per tile, at most one per SM, at least
// one: the flags flow even without tiles).
class FusedCall {
 public:
  FusedCall(Device& device, const FusedSync& sync, int tile_count, int sm_count)
      : sync_(sync),
        state_(device.allocate(2 * sizeof(unsigned long long))),
        blocks_(std::max(1, std::min(tile_count, sm_count))) {
    RESHARD_CUDA_CHECK(cudaMemset(state_->data(), 0, 2 * sizeof(unsigned long long)));
    RESHARD_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));  // the runs' streams do not wait for it
    sync_.state = static_cast<unsigned long long*>(state_->data());
  }
  const FusedSync& sync() const { return sync_; }
  int blocks() const { return blocks_; }

 private:
  FusedSync sync_;
  std::unique_ptr<DeviceMemory> state_;
  int blocks_;
};

class FusedCopyBatch : public CopyBatch {
 public:
  FusedCopyBatch(Device& device, int ordinal, int sm_count, const std::vector<CopyRegion>& regions, int es,
                 const FusedSync& sync)
      : tiles_(device, ordinal, regions, es, copy_tile_bytes(regions, es, sm_count)),
        call_(device, sync, tiles_.tile_count(), sm_count) {}
  void run(const BufferBases& b, StreamHandle stream) override {
    RESHARD_CUDA_CHECK(launch_fused(tiles_.regions(), tiles_.tiles(), tiles_.tile_count(), call_.blocks(),
                                    tiles_.bases().fill(b), call_.sync(), static_cast<cudaStream_t>(stream)));
  }

 private:
  TileSet tiles_;
  FusedCall call_;
};

class FusedReduceBatch : public CopyBatch {
 public:
  FusedReduceBatch(Device& device, int sm_count, const std::vector<ReduceRegion>& regions, DType dtype,
                   const FusedSync& sync)
      : tiles_(device, regions, dtype, reduce_tile_elements(regions, dtype, sm_count)),
        call_(device, sync, tiles_.tile_count(), sm_count) {}
  void run(const BufferBases& b, StreamHandle stream) override {
    RESHARD_CUDA_CHECK(launch_fused_reductions(tiles_.regions(), tiles_.sources(), tiles_.tiles(), tiles_.tile_count(),
                                               call_.blocks(), tiles_.kernel_dtype(), tiles_.bases().fill(b),
                                               call_.sync(), static_cast<cudaStream_t>(stream)));
  }

 private:
  ReduceTileSet tiles_;
  FusedCall call_;
};

}  // namespace

std::unique_ptr<CopyBatch> make_fused_copies(Device& device, int ordinal, int sm_count,
                                             const std::vector<CopyRegion>& regions, int element_size,
                                             const FusedSync& sync) {
  return std::make_unique<FusedCopyBatch>(device, ordinal, sm_count, regions, element_size, sync);
}

std::unique_ptr<CopyBatch> make_fused_reductions(Device& device, int ordinal, int sm_count,
                                                 const std::vector<ReduceRegion>& regions, DType dtype,
                                                 const FusedSync& sync) {
  RESHARD_CUDA_CHECK(cudaSetDevice(ordinal));
  return std::make_unique<FusedReduceBatch>(device, sm_count, regions, dtype, sync);
}

}  // namespace reshard::cuda
