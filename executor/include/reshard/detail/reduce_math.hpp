// The arithmetic of reductions, shared by the host backend and the CUDA kernels so both give the same bits:
// f64 accumulates in double, f32/f16/bf16 in float, integers in 64 bits (stored back truncated to the element
// type, which wraps like the element type's own arithmetic for sum). A divisor > 1 divides the result (avg; the
// partition of a replicated value into Partial(sum)); integers divide truncating toward zero. complex64 reduces as
// pairs of f32 (float_pairs()), so it has no arithmetic of its own here.
#pragma once

#include <cstdint>
#include <type_traits>

#include "reshard/detail/host_device.hpp"
#include "reshard/dtype.hpp"

namespace reshard::detail {

template <class Acc>
RESHARD_HOST_DEVICE inline Acc combine(Acc a, Acc b, ReduceOp op) {
  switch (op) {
    case ReduceOp::kMax:
      return a < b ? b : a;
    case ReduceOp::kMin:
      return b < a ? b : a;
    default:
      if constexpr (std::is_integral_v<Acc>) {
        // Wraps like the hardware (and NCCL) instead of signed overflow, which C++ leaves undefined.
        using U = std::make_unsigned_t<Acc>;
        return static_cast<Acc>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
      } else {
        return a + b;
      }
  }
}

template <class Acc>
RESHARD_HOST_DEVICE inline Acc finish(Acc a, std::int64_t divisor) {
  return divisor > 1 ? a / static_cast<Acc>(divisor) : a;
}

// Whether T is one of Us.
template <class T, class... Us>
inline constexpr bool is_one_of_v = (std::is_same_v<T, Us> || ...);

// The accumulator of an element type that reduces elementwise: double for f64, float for f32/f16/bf16, int64 for
// integers; void for the others (complex64 reduces as f32 pairs; fp8, bool and i16 do not reduce).
template <class T>
struct Accumulator {
  using type = std::conditional_t<
      std::is_same_v<T, double>, double,
      std::conditional_t<is_one_of_v<T, float, Float16, BFloat16>, float,
                         std::conditional_t<is_one_of_v<T, std::int64_t, std::int32_t, std::int8_t, std::uint8_t>,
                                            std::int64_t, void>>>;
};

// The dtype a reduction over `dtype` runs as, and how many of its elements one element of `dtype` is: complex64
// runs as f32 with twice the elements (NCCL's complex sum is a float sum over 2 * count); others as themselves.
struct ReduceAs {
  DType dtype;
  int lanes;
};
RESHARD_HOST_DEVICE constexpr ReduceAs reduce_as(DType dtype) {
  return dtype == DType::kC64 ? ReduceAs{DType::kF32, 2} : ReduceAs{dtype, 1};
}

}  // namespace reshard::detail
