// block_scale.hpp's arithmetic, shared by the host quantizer and the CUDA kernel (C++17, no layouts).
#pragma once

#include <type_traits>

#include "reshard/detail/host_device.hpp"
#include "reshard/dtype.hpp"

namespace reshard {
namespace detail {

// The element types of block_scales_from and block_scales_to (the kernels' instances).
template <class T>
inline constexpr bool kBlockScaledFrom =
    std::is_same_v<T, double> || std::is_same_v<T, float> || std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;
template <class T>
inline constexpr bool kBlockScaledTo = std::is_same_v<T, Float8E4M3> || std::is_same_v<T, Float8E5M2>;

// The largest finite value of an fp8 type (f8e4m3 448, f8e5m2 57344).
RESHARD_HOST_DEVICE inline float fp8_largest(DType to) { return to == DType::kF8E5M2 ? 57344.0f : 448.0f; }

// max(m, |v|), a NaN in either kept (fmaxf would drop it).
RESHARD_HOST_DEVICE inline float amax_step(float m, float v) {
  const float a = v < 0 ? -v : v;
  return (a > m || a != a) ? a : m;
}

// Two partial maxima combined as amax_step combines an element (a NaN in either kept).
RESHARD_HOST_DEVICE inline float amax_join(float m, float other) { return (other > m || other != other) ? other : m; }

RESHARD_HOST_DEVICE inline float scale_inv_of(float amax, float largest) {
  const float s = amax / largest;
  return s == 0 ? 1.0f : s;
}

}  // namespace detail
}  // namespace reshard
