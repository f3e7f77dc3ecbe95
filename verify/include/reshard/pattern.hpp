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
// The same against the pattern of `dtype` converted to `to_dtype` on the host (convert_bits: dtype_convert.hpp's
// rules), `data` holding elements of `to_dtype`: what a plan that converts must write.
Index count_mismatches(const void* data, const Box& box, const Dims& global_shape, DType dtype, DType to_dtype);
// The pattern's value of one element, as a double (for messages; complex64: its real part).
double pattern_value(Index global_index, DType dtype);

}  // namespace reshard

#include "reshard/layout.hpp"

namespace reshard {

// The pattern as rank `rank` holds it in `layout`: its box of the global tensor, and on Partial mesh dims its
// contribution. Contributions are chosen so that every rank's contribution shows in the reduced value, for every
// reduce op and dtype where the dtype has room: an executor that skips a reduction, or drops or repeats one rank's
// contribution, is reported wrong. For element i with pattern value v, the q-th of Q contributions (row-major over the
// Partial dims), with h(i, q) a hash and w(i, q) = h mod (2W + 1) - W an offset in [-W, W]:
//   sum: w(i, q) for q >= 1, v - (sum of the others) for q = 0          (sums exactly to v, in any order)
//   avg: v + w(i, q) for q >= 1, v - (sum of the others' w) for q = 0   (averages to v)
//   avg on i8/u8: values in [-127/Q, 127/Q] (u8: [0, 255/Q]) from the hash, so no partial sum wraps; the expected
//        value is their truncated average
//   max/min: v on the rank h(i, 0) mod Q (a different one from element to element), v -+ (1 + h mod 8) on the others
// W = 64, or less where partial sums of Q contributions would leave the integers the floating type holds exactly
// (bf16: W = 128 / (Q - 1), f16: 1024 / (Q - 1)). Where the dtype has no room the check is weaker, and says nothing
// about the ranks concerned: W = 0 (bf16 beyond 129 contributions, f16 beyond 1025) leaves every q >= 1 contributing
// 0; avg on i8 beyond 127 contributions (u8: 255) gives every rank v; max/min cannot go below/above an element whose
// v is the type's extreme (u8 0 or 255, i8 127 for min). Layouts whose Partial dims mix reduce ops are refused.
void fill_local(void* data, const Layout& layout, int rank, DType dtype);

// Elements of rank's target tensor (dense over its box in `dst`) that differ from what redistributing the
// pattern from `src` gives: on kept Partial dims (partial.hpp) the reduction of the source contributions over the
// reduced dims, on created ones the partition of the value. Bit-exact without Partial, for integer types and for
// max/min; floating sums and averages of Partial placements compare within partial_tolerance().
Index count_local_mismatches(const void* data, const Layout& src, const Layout& dst, int rank, DType dtype);
// For a plan that converts `dtype` to `to_dtype` (to_dtype == dtype: the version above): the reduced value of the
// source (the pattern itself: sums, max and min of the contributions give it exactly) converted on the host, compared
// bit for bit. A Partial target is refused (kInvalidArgument), as the planner refuses converting into one.
Index count_local_mismatches(const void* data, const Layout& src, const Layout& dst, int rank, DType dtype,
                             DType to_dtype);

// |got - want| allowed for floating types when sums or averages of Partial placements are involved:
// rtol * (magnitude + Q^2), where magnitude is the sum of the contributions' absolute values (|want| without
// contributions), Q the number of contributions and rtol 2^-(mantissa bits - 2): 2^-50 (f64), 2^-21 (f32), 2^-8 (f16),
// 2^-5 (bf16). Averages over NCCL round (it scales every contribution by 1/Q); sums of the pattern's contributions are
// exact. max and min are compared exactly (they pick one of their inputs).
double partial_tolerance(DType dtype, double magnitude, Index contributions);

}  // namespace reshard
