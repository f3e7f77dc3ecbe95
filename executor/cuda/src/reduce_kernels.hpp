// Plain-data interface of the batched reduction kernel (Device::prepare_reductions on CUDA).
#pragma once

#include <cuda_runtime.h>

#include "kernels.hpp"
#include "reshard/dtype.hpp"

namespace reshard::cuda {

constexpr int kMaxReduceDims = 8;

// One reduction region in elements of the dtype the kernel runs (complex64 runs as f32 pairs: reduce_as()): dst =
// reduce(op, srcs[first_src .. first_src + src_count)) / divisor over a box whose innermost dim is contiguous in every
// view (stride 1): rows of shape[ndim - 1] elements, indexed row-major over the outer dims.
struct DeviceReduceRegion {
  int dst_buffer = 0;  // 0 input, 1 output, 2 workspace
  int ndim = 0;
  int first_src = 0, src_count = 0;
  ReduceOp op = ReduceOp::kSum;
  long long divisor = 1;
  long long dst_offset = 0;
  long long shape[kMaxReduceDims] = {};
  long long dst_stride[kMaxReduceDims] = {};
  // 1: a region of a converting batch that writes an output buffer: the result, rounded to the dtype the kernel runs,
  // is stored converted to the batch's output dtype (dst_offset and dst_stride count its elements).
  int convert = 0;
};

struct DeviceReduceSource {
  int buffer = 0;
  long long offset = 0;
  long long stride[kMaxReduceDims] = {};
};

// A block's share of a region: rows [row_begin, row_end), elements [col_begin, col_end) of each row.
struct DeviceReduceTile {
  int region = 0;
  long long row_begin = 0, row_end = 0;
  long long col_begin = 0, col_end = 0;
};

// Loads every dtype's reduction kernel into the current device's context now (see load_copy_kernels, kernels.hpp).
cudaError_t load_reduce_kernels();

// Loads every dtype's fused reduction kernel (fused_reduce_kernel.cu) into the current device's context now.
cudaError_t load_fused_reduce_kernels();

// The fused step that reduces: post ready, wait for the sources, reduce every tile, post done, wait for the readers
// (kernels.hpp's FusedSync); `blocks` blocks (at least one, even with no tiles: the flags still flow).
cudaError_t launch_fused_reductions(const DeviceReduceRegion* regions, const DeviceReduceSource* sources,
                                    const DeviceReduceTile* tiles, int tile_count, int blocks, DType dtype,
                                    DeviceBases bases, const FusedSync& sync, cudaStream_t stream);

cudaError_t launch_reductions(const DeviceReduceRegion* regions, const DeviceReduceSource* sources,
                              const DeviceReduceTile* tiles, int tile_count, DType dtype, DeviceBases bases,
                              cudaStream_t stream);

// The batched and the fused reductions of a converting batch (convert_reduce_kernels.cu): regions marked `convert`
// store their results as `to`; cudaErrorInvalidValue for a pair that does not convert. The load_ function loads the
// pair's two kernels now (as load_reduce_kernels).
cudaError_t load_converting_reductions(DType from, DType to);
cudaError_t launch_converting_reductions(DType from, DType to, const DeviceReduceRegion* regions,
                                         const DeviceReduceSource* sources, const DeviceReduceTile* tiles,
                                         int tile_count, DeviceBases bases, cudaStream_t stream);
cudaError_t launch_converting_fused_reductions(DType from, DType to, const DeviceReduceRegion* regions,
                                               const DeviceReduceSource* sources, const DeviceReduceTile* tiles,
                                               int tile_count, int blocks, DeviceBases bases, const FusedSync& sync,
                                               cudaStream_t stream);

}  // namespace reshard::cuda
