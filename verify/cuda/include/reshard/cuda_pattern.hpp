// The deterministic test tensor (reshard/pattern.hpp) on a GPU: fill a rank's local tensor and count the elements that
// differ from it, as the host versions do.
#pragma once

#include <cuda_runtime.h>

#include <memory>

#include "reshard/backend.hpp"
#include "reshard/box.hpp"
#include "reshard/dtype.hpp"

namespace reshard {

class CudaPatternChecker {
 public:
  // Allocates the mismatch counter on `device`.
  explicit CudaPatternChecker(Device& device);

  // Writes the pattern's elements of `box` (global coordinates of a tensor of `global_shape`) into `data` (device
  // memory, dense row-major over the box), on `stream`.
  void fill(void* data, const Box& box, const Dims& global_shape, DType dtype, cudaStream_t stream);
  // Number of elements of `data` that differ bitwise from the pattern (synchronises `stream`).
  Index count_mismatches(const void* data, const Box& box, const Dims& global_shape, DType dtype, cudaStream_t stream);

 private:
  std::unique_ptr<DeviceMemory> counter_;
};

}  // namespace reshard
