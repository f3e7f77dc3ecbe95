// The CUDA device's copy batches (internal to the CUDA backend).
#pragma once

#include <memory>
#include <vector>

#include "device_bases.hpp"
#include "kernels.hpp"
#include "reshard/backend.hpp"

namespace reshard::cuda {

// A batch's copy regions cut into tiles (64 KiB of rows each) for the copy kernels, descriptors uploaded once.
class TileSet {
 public:
  // Regions cut into tiles of at most `tile_bytes` (a multiple of 16; 64 KiB by default), naming at most `max_bases`
  // buffers (BaseTable).
  // `output_element_size` > 0: a converting batch; regions that write an output buffer are marked `convert`, their
  // destination offsets and strides in elements of that size.
  TileSet(Device& device, int ordinal, const std::vector<CopyRegion>& regions, int element_size,
          long long tile_bytes = 64 * 1024, int max_bases = kMaxBases, int output_element_size = 0);
  const DeviceCopyRegion* regions() const { return regions_; }
  const DeviceCopyTile* tiles() const { return tiles_; }
  int tile_count() const { return tile_count_; }
  const BaseTable& bases() const { return bases_; }

 private:
  BaseTable bases_;
  int tile_count_ = 0;
  std::unique_ptr<DeviceMemory> memory_;
  DeviceCopyRegion* regions_ = nullptr;
  DeviceCopyTile* tiles_ = nullptr;
};

// Copies on SM kernels, one launch per run; max_blocks > 0 caps the grid (copies beside communication).
std::unique_ptr<CopyBatch> make_kernel_copies(Device& device, int ordinal, const std::vector<CopyRegion>& regions,
                                              int element_size, int max_blocks);
// Copies of a converting batch (DeviceCopyRegion::convert): one launch of the pair's kernel; at most kMaxCopyBases buffers.
std::unique_ptr<CopyBatch> make_converting_copies(Device& device, int ordinal, const std::vector<CopyRegion>& regions,
                                                  DType dtype, DType output_dtype, int max_blocks);

// Copies on the copy engines: one cudaMemcpyAsync / cudaMemcpy2DAsync / cudaMemcpy3DAsync per region (at most 3-D
// after simplification; kInvalidArgument otherwise), addresses resolved per run from the bases (peer regions
// included: the engines read the peer's memory over NVLink). Capturable in a CUDA graph.
std::unique_ptr<CopyBatch> make_engine_copies(const std::vector<CopyRegion>& regions, int element_size);

}  // namespace reshard::cuda
