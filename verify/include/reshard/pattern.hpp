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
// The pattern's value of one element, as a double (for messages; complex64: its real part).
double pattern_value(Index global_index, DType dtype);

}  // namespace reshard

#include "reshard/layout.hpp"

namespace reshard {

// The pattern as rank `rank` holds it in `layout`: its box of the global tensor, and on Partial mesh dims its
// contribution. Contributions of the q-th of Q coordinates (row-major over the Partial dims) for element i with
// pattern value v, with w = ((i + q) mod 3) - 1 for q >= 1:
//   sum: w (q >= 1), v - (sum of the others) (q = 0)        avg: v + w (q >= 1), v - (sum of the others' w) (q = 0)
//   max: v - |w| (q >= 1), v (q = 0)                          min: v + |w| (q >= 1), v (q = 0)
// (8-bit integers keep v where v +- |w| leaves their range, and hold v everywhere for avg). They are small
// integers, so they reduce to v exactly in any order. Layouts whose Partial dims mix reduce ops are refused.
void fill_local(void* data, const Layout& layout, int rank, DType dtype);

// Elements of rank's target tensor (dense over its box in `dst`) that differ from what redistributing the
// pattern from `src` gives: on kept Partial dims (partial.hpp) the reduction of the source contributions over the
// reduced dims, on created ones the partition of the value. Bit-exact without Partial and for integer types;
// floating types with Partial placements compare within partial_tolerance().
Index count_local_mismatches(const void* data, const Layout& src, const Layout& dst, int rank, DType dtype);

// |got - want| allowed for floating types when Partial placements are involved: rtol * Q * (|want| + Q), where Q
// is the number of contributions and rtol is 2^-(mantissa bits - 2): 2^-50 (f64), 2^-21 (f32), 2^-8 (f16),
// 2^-5 (bf16). Reductions over NCCL may round intermediate sums (f16 and bf16 in their own format).
double partial_tolerance(DType dtype, double want, Index contributions);

}  // namespace reshard
