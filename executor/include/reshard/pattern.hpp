// The deterministic test tensor (detail/pattern_bits.hpp) on host memory: fill a rank's local tensor of a box and
// count the elements that differ from it. CUDA versions live in reshard/cuda_device.hpp.
#pragma once

#include "reshard/box.hpp"
#include "reshard/dtype.hpp"

namespace reshard {

// Writes the pattern's elements of `box` (global coordinates of a tensor of `global_shape`) into `data`, dense
// row-major over the box.
void fill_pattern(void* data, const Box& box, const Dims& global_shape, DType dtype);
// Number of elements of `data` (dense over `box`) that differ bitwise from the pattern.
Index count_mismatches(const void* data, const Box& box, const Dims& global_shape, DType dtype);
// The pattern's value of one element, as a double (for messages).
double pattern_value(Index global_index, DType dtype);

}  // namespace reshard
