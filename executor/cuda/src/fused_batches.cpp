// The fused one-sided steps' batches: tiles sized so that a small step spreads over the SMs, a call counter on the
// device, one launch per run.
#include "fused_batches.hpp"

#include <algorithm>

#include "copy_batches.hpp"
#include "reduce_tiles.hpp"
#include "reshard/cuda_check.hpp"

namespace reshard::cuda {
namespace {

// Tiles of a fused copy step: the smallest power of two of 2 KiB to 64 KiB that makes at most one tile per SM where the
// step allows (a block, one per SM, then copies one tile: each tile a block walks costs a round trip to the peer, and a
// 16 KiB tile is one round of its threads' loads, copy_tile.cuh), and small tiles for small steps, so that their
// blocks spread over the SMs instead of leaving most of the GPU idle.
long long tile_bytes_for(const std::vector<CopyRegion>& regions, int es, int sm_count) {
  long long total = 0;
  for (const CopyRegion& r : regions) total += r.shape.product() * es;
  long long tile = 2048;
  while (tile < 64 * 1024 && (total + tile - 1) / tile > sm_count) tile *= 2;
  return tile;
}

// Tiles of a fused reduction step, in elements of the dtype the kernel runs: the same rule from 2K elements (one round
// of a block's loads of a source for types of up to 4 bytes, kFusedUnroll in fused_reduce_kernel.cu) to the batched
// kernel's 4K.
long long tile_elements_for(const std::vector<ReduceRegion>& regions, DType dtype, int sm_count) {
  long long total = 0;
  for (const ReduceRegion& r : regions) total += r.shape.product() * detail::reduce_as(dtype).lanes;
  long long tile = 2048;
  while (tile < kReduceTileElements && (total + tile - 1) / tile > sm_count) tile *= 2;
  return tile;
}

// A fused step's call counter on the device: [0] calls completed, [1] blocks finished in the current call.
std::unique_ptr<DeviceMemory> call_state(Device& device, FusedSync& sync) {
  auto state = device.allocate(2 * sizeof(unsigned long long));
  RESHARD_CUDA_CHECK(cudaMemset(state->data(), 0, 2 * sizeof(unsigned long long)));
  RESHARD_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));  // the runs' streams do not wait for it
  sync.state = static_cast<unsigned long long*>(state->data());
  return state;
}

class FusedCopyBatch : public CopyBatch {
 public:
  FusedCopyBatch(Device& device, int ordinal, int sm_count, const std::vector<CopyRegion>& regions, int es,
                 const FusedSync& sync)
      : tiles_(device, ordinal, regions, es, tile_bytes_for(regions, es, sm_count)), sync_(sync) {
    state_ = call_state(device, sync_);
    blocks_ = std::max(1, std::min(tiles_.tile_count(), sm_count));
  }
  void run(const BufferBases& b, StreamHandle stream) override {
    RESHARD_CUDA_CHECK(launch_fused(tiles_.regions(), tiles_.tiles(), tiles_.tile_count(), blocks_,
                                    tiles_.bases().fill(b), sync_, static_cast<cudaStream_t>(stream)));
  }

 private:
  TileSet tiles_;
  FusedSync sync_;
  std::unique_ptr<DeviceMemory> state_;
  int blocks_ = 1;
};

class FusedReduceBatch : public CopyBatch {
 public:
  FusedReduceBatch(Device& device, int sm_count, const std::vector<ReduceRegion>& regions, DType dtype,
                   const FusedSync& sync)
      : tiles_(device, regions, dtype, tile_elements_for(regions, dtype, sm_count)), sync_(sync) {
    state_ = call_state(device, sync_);
    blocks_ = std::max(1, std::min(tiles_.tile_count(), sm_count));
  }
  void run(const BufferBases& b, StreamHandle stream) override {
    RESHARD_CUDA_CHECK(launch_fused_reductions(tiles_.regions(), tiles_.sources(), tiles_.tiles(), tiles_.tile_count(),
                                               blocks_, tiles_.kernel_dtype(), tiles_.bases().fill(b), sync_,
                                               static_cast<cudaStream_t>(stream)));
  }

 private:
  ReduceTileSet tiles_;
  FusedSync sync_;
  std::unique_ptr<DeviceMemory> state_;
  int blocks_ = 1;
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
