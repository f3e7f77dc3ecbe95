// A batch of reductions cut into tiles for the reduction kernels, descriptors uploaded once (internal to the CUDA
// backend: the batched reduction and the fused step that reduces).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "device_bases.hpp"
#include "reduce_kernels.hpp"
#include "reshard/backend.hpp"
#include "reshard/detail/reduce_math.hpp"

namespace reshard::cuda {

// The default tile: small enough that a few MiB spread over every SM (a 2 MiB f32 reduction is 128 tiles), as the
// loads of a tile's row wait on NVLink round trips when a source is a peer's memory.
inline constexpr long long kReduceTileElements = 4 * 1024;

class ReduceTileSet {
 public:
  // `regions` over `dtype` (kInvalidArgument for a region the kernels cannot run or an op the dtype does not allow),
  // cut into tiles of at most `tile_elements` elements of the dtype the kernel runs (complex64: f32 pairs).
  // `output_dtype` other than `dtype`: a converting batch; its regions that write an output buffer are marked
  // `convert` (DeviceReduceRegion).
  ReduceTileSet(Device& device, const std::vector<ReduceRegion>& regions, DType dtype,
                long long tile_elements = kReduceTileElements, std::optional<DType> output_dtype = std::nullopt);
  const DeviceReduceRegion* regions() const { return regions_; }
  const DeviceReduceSource* sources() const { return sources_; }
  const DeviceReduceTile* tiles() const { return tiles_; }
  int tile_count() const { return tile_count_; }
  DType kernel_dtype() const { return as_.dtype; }  // the dtype the kernel runs (detail::reduce_as)
  // Whether the regions convert: a converting batch whose regions write an output buffer (then all of them do:
  // kInternal otherwise, as the lowering puts only the last step's reductions, all into the output, in one batch).
  bool converts() const { return converts_; }
  const BaseTable& bases() const { return bases_; }

 private:
  BaseTable bases_;
  detail::ReduceAs as_;
  bool converts_ = false;
  int tile_count_ = 0;
  std::unique_ptr<DeviceMemory> memory_;
  DeviceReduceRegion* regions_ = nullptr;
  DeviceReduceSource* sources_ = nullptr;
  DeviceReduceTile* tiles_ = nullptr;
};

}  // namespace reshard::cuda
