// Plain-data interface between the CUDA verifier and its kernels (compiled as C++17 by nvcc).
#pragma once

#include <cuda_runtime.h>

#include "reshard/dtype.hpp"

namespace reshard::cuda {

constexpr int kMaxPatternDims = 8;

struct PatternBox {
  int ndim = 0;
  long long shape[kMaxPatternDims] = {};          // the box's extents
  long long offset[kMaxPatternDims] = {};         // its global offset
  long long global_stride[kMaxPatternDims] = {};  // row-major strides of the global tensor
  long long elements = 0;
};

// Loads both pattern kernels into the current device's context now (not lazily at their first launch, which may
// synchronise the context while one-sided waits hold streams).
cudaError_t load_pattern_kernels();

cudaError_t launch_fill_pattern(void* data, PatternBox box, DType dtype, int element_size, cudaStream_t stream);
// Adds the number of elements differing from the pattern to *counter (device memory).
cudaError_t launch_count_mismatches(const void* data, PatternBox box, DType dtype, int element_size,
                                    unsigned long long* counter, cudaStream_t stream);

}  // namespace reshard::cuda
