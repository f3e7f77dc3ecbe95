// The fused one-sided steps' batches: tiles sized so that a small step spreads over the SMs, a call counter on the
// device, one launch per run.
#include "fused_batches.hpp"

#include <algorithm>

#include "copy_batches.hpp"
#include "reduce_tiles.hpp"
#include "reshard/cuda_check.hpp"
#include "reshard/dtype_convert.hpp"

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

bool writes_output(const std::vector<CopyRegion>& regions) {
  return std::any_of(regions.begin(), regions.end(),
                     [](const CopyRegion& r) { return r.dst.buffer == Buffer::kOutput; });
}

class FusedCopyBatch : public CopyBatch {
 public:
  // Converting (dtype != output_dtype, some region into an output buffer): those regions convert, on the pair's
  // fused kernel.
  FusedCopyBatch(Device& device, int ordinal, int sm_count, const std::vector<CopyRegion>& regions, DType dtype,
                 DType output_dtype, const FusedSync& sync)
      : dtype_(dtype),
        output_dtype_(writes_output(regions) ? output_dtype : dtype),
        tiles_(device, ordinal, regions, element_size(dtype), copy_tile_bytes(regions, element_size(dtype), sm_count),
               kMaxBases, dtype_ != output_dtype_ ? element_size(output_dtype_) : 0),
        call_(device, sync, tiles_.tile_count(), sm_count) {
    if (dtype_ != output_dtype_) RESHARD_CUDA_CHECK(load_converting_kernels(dtype_, output_dtype_));
  }
  void run(const BufferBases& b, StreamHandle stream) override {
    const auto s = static_cast<cudaStream_t>(stream);
    if (dtype_ != output_dtype_)
      RESHARD_CUDA_CHECK(launch_converting_fused(dtype_, output_dtype_, tiles_.regions(), tiles_.tiles(),
                                                 tiles_.tile_count(), call_.blocks(), tiles_.bases().fill(b),
                                                 call_.sync(), s));
    else
      RESHARD_CUDA_CHECK(launch_fused(tiles_.regions(), tiles_.tiles(), tiles_.tile_count(), call_.blocks(),
                                      tiles_.bases().fill(b), call_.sync(), s));
  }

 private:
  DType dtype_, output_dtype_;  // equal: no conversion
  TileSet tiles_;
  FusedCall call_;
};

// Converting (output_dtype != dtype): the pair's fused kernel, whose regions into an output buffer store converted.
class FusedReduceBatch : public CopyBatch {
 public:
  FusedReduceBatch(Device& device, int sm_count, const std::vector<ReduceRegion>& regions, DType dtype,
                   DType output_dtype, const FusedSync& sync)
      : tiles_(device, regions, dtype, reduce_tile_elements(regions, dtype, sm_count), output_dtype),
        call_(device, sync, tiles_.tile_count(), sm_count),
        output_dtype_(output_dtype) {
    if (converts()) RESHARD_CUDA_CHECK(load_converting_reductions(tiles_.kernel_dtype(), output_dtype_));
  }
  void run(const BufferBases& b, StreamHandle stream) override {
    const auto s = static_cast<cudaStream_t>(stream);
    if (converts())
      RESHARD_CUDA_CHECK(launch_converting_fused_reductions(tiles_.kernel_dtype(), output_dtype_, tiles_.regions(),
                                                            tiles_.sources(), tiles_.tiles(), tiles_.tile_count(),
                                                            call_.blocks(), tiles_.bases().fill(b), call_.sync(), s));
    else
      RESHARD_CUDA_CHECK(launch_fused_reductions(tiles_.regions(), tiles_.sources(), tiles_.tiles(),
                                                 tiles_.tile_count(), call_.blocks(), tiles_.kernel_dtype(),
                                                 tiles_.bases().fill(b), call_.sync(), s));
  }

 private:
  bool converts() const { return tiles_.converts(); }
  ReduceTileSet tiles_;
  FusedCall call_;
  DType output_dtype_;
};

}  // namespace

std::unique_ptr<CopyBatch> make_fused_copies(Device& device, int ordinal, int sm_count,
                                             const std::vector<CopyRegion>& regions, DType dtype, DType output_dtype,
                                             const FusedSync& sync) {
  if (dtype != output_dtype) require_convertible(dtype, output_dtype);
  return std::make_unique<FusedCopyBatch>(device, ordinal, sm_count, regions, dtype, output_dtype, sync);
}

std::unique_ptr<CopyBatch> make_fused_reductions(Device& device, int ordinal, int sm_count,
                                                 const std::vector<ReduceRegion>& regions, DType dtype,
                                                 DType output_dtype, const FusedSync& sync) {
  RESHARD_CUDA_CHECK(cudaSetDevice(ordinal));
  return std::make_unique<FusedReduceBatch>(device, sm_count, regions, dtype, output_dtype, sync);
}

}  // namespace reshard::cuda
