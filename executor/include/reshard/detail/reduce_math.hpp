// The arithmetic of reductions, shared by the host backend and the CUDA kernels so both give the same bits:
// f64 accumulates in double, f32/f16/bf16 in float, integers in 64 bits (stored back truncated to the element
// type, which wraps like the element type's own arithmetic for sum). A divisor > 1 divides the result (avg; the
// partition of a replicated value into Partial(sum)); integers divide truncating toward zero.
#pragma once

#include <cstdint>
#include <type_traits>

#include "reshard/detail/host_device.hpp"

namespace reshard::detail {

// ReduceOp's order: sum, avg, max, min.
template <class Acc>
RESHARD_HOST_DEVICE inline Acc combine(Acc a, Acc b, int op) {
  switch (op) {
    case 2:
      return a < b ? b : a;
    case 3:
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

}  // namespace reshard::detail
