// dtype conversion in the move (PlanSpec::to_dtype): which pairs convert, and the element conversion the host copies
// and the CUDA kernels share.
//
// Pairs: any two different floating dtypes of f64 f32 f16 bf16 f8e4m3 f8e5m2. Every other pair is refused
// (require_convertible): integers, bool and complex64 hold values a cast would change (truncation, wrap-around, a
// dropped imaginary part), which a redistribution must not do silently.
//
// Values follow PyTorch's tensor.to(dtype) bit for bit on finite inputs, and on infinities and NaNs as stated:
//  - to f64 and f32 from a narrower type: exact; f64 -> f32: the C++ cast (round to nearest even).
//  - every other target goes through f32 (as c10's Half, BFloat16 and Float8 constructors do for a double), then
//    rounds to nearest even:
//    bf16: c10::round_to_nearest_even; a NaN becomes 0x7fc0;
//    f16:  overflow (|x| >= 65520) becomes an infinity of the sign; a NaN becomes sign | 0x7e00;
//    f8e4m3 (float8_e4m3fn, c10::detail::fp8e4m3fn_from_fp32_value): no saturation: |x| up to 464 rounds to at most
//          448 (464, a tie, to 448); larger values round into the NaN encoding, so they, infinities and NaNs become the
//          NaN sign | 0x7f; subnormals (below 2^-6) round to nearest even in steps of 2^-9;
//    f8e5m2 (c10::detail::fp8e5m2_from_fp32_value): |x| >= 65536 and infinities become an infinity of the sign
//          (sign | 0x7c); NaNs sign | 0x7f; values from 61440 round to nearest even (so to infinity from 61440).
#pragma once

#include <cstdint>
#include <type_traits>

#include "reshard/detail/host_device.hpp"
#include "reshard/dtype.hpp"

#ifndef __CUDA_ARCH__
#include <cstring>
#endif

namespace reshard {

// Whether a plan may convert elements of `from` into `to` on the move (the pairs above; false for from == to).
bool convertible(DType from, DType to);
// kInvalidArgument, one line naming both dtypes and the rule, when !convertible(from, to).
void require_convertible(DType from, DType to);
// Converts `count` dense elements of `from` at `src` into `to` at `dst` (host memory; from == to copies).
void convert_elements(const void* src, DType from, void* dst, DType to, std::int64_t count);
// The bits (low element_size(to) bytes) that element bits `bits` of `from` become in `to`.
std::uint64_t convert_bits(std::uint64_t bits, DType from, DType to);

namespace detail {

RESHARD_HOST_DEVICE inline std::uint32_t cvt_float_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

RESHARD_HOST_DEVICE inline float cvt_bits_float(std::uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// ---- decoding (exact) ----

RESHARD_HOST_DEVICE inline float cvt_bf16_to_float(std::uint16_t h) {
  return cvt_bits_float(static_cast<std::uint32_t>(h) << 16);
}

RESHARD_HOST_DEVICE inline float cvt_f16_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) {
    if (mant == 0) return cvt_bits_float(sign);
    int e = -1;  // subnormal: normalise
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    mant &= 0x3ffu;
    return cvt_bits_float(sign | static_cast<std::uint32_t>(127 - 15 - e) << 23 | mant << 13);
  }
  if (exp == 31) return cvt_bits_float(sign | 0x7f800000u | mant << 13);
  return cvt_bits_float(sign | (exp + 127 - 15) << 23 | mant << 13);
}

RESHARD_HOST_DEVICE inline float cvt_f8e4m3_to_float(std::uint8_t b) {
  const std::uint32_t sign = static_cast<std::uint32_t>(b & 0x80u) << 24;
  const std::uint32_t exp = (b >> 3) & 0xfu, mant = b & 0x7u;
  if (exp == 0xf && mant == 0x7) return cvt_bits_float(sign | 0x7fc00000u);
  if (exp == 0) {  // m * 2^-9
    const float v = static_cast<float>(mant) / 512.0f;
    return sign ? -v : v;
  }
  return cvt_bits_float(sign | (exp + 127 - 7) << 23 | mant << 20);
}

RESHARD_HOST_DEVICE inline float cvt_f8e5m2_to_float(std::uint8_t b) {
  return cvt_f16_to_float(static_cast<std::uint16_t>(static_cast<std::uint16_t>(b) << 8));
}

// ---- encoding (round to nearest even; the header comment's rules) ----

RESHARD_HOST_DEVICE inline std::uint16_t cvt_float_to_bf16(float f) {
  std::uint32_t u = cvt_float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

RESHARD_HOST_DEVICE inline std::uint16_t cvt_float_to_f16(float f) {
  const std::uint32_t u = cvt_float_bits(f);
  const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: infinity
  if (abs < 0x38800000u) {                        // subnormal or zero in f16
    if (abs < 0x33000000u) return sign;           // rounds to zero
    const std::uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(abs >> 23);
    std::uint32_t half_mant = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_mant & 1u))) ++half_mant;
    return sign | static_cast<std::uint16_t>(half_mant);
  }
  std::uint32_t r = abs - 0x38000000u;  // rebias exponent 127 -> 15
  r += 0xfffu + ((r >> 13) & 1u);
  return sign | static_cast<std::uint16_t>(r >> 13);
}

RESHARD_HOST_DEVICE inline std::uint8_t cvt_float_to_f8e4m3(float f) {
  constexpr std::uint32_t kNanFrom = 1087u << 20;    // 480.0f: from here the rounding below would overflow the byte
  constexpr std::uint32_t kDenormMask = 141u << 23;  // adding 2^14 leaves the subnormal's bits at the bottom
  constexpr std::uint32_t kMinNormal = 121u << 23;   // 2^-6
  std::uint32_t bits = cvt_float_bits(f);
  const std::uint32_t sign = bits & 0x80000000u;
  bits ^= sign;
  std::uint8_t result;
  if (bits >= kNanFrom) {  // beyond the range, infinities and NaNs
    result = 0x7f;
  } else if (bits < kMinNormal) {
    bits = cvt_float_bits(cvt_bits_float(bits) + cvt_bits_float(kDenormMask));
    result = static_cast<std::uint8_t>(bits - kDenormMask);
  } else {
    const std::uint32_t mant_odd = (bits >> 20) & 1u;
    bits += (static_cast<std::uint32_t>(7 - 127) << 23) + 0x7ffffu;
    bits += mant_odd;
    result = static_cast<std::uint8_t>(bits >> 20);
  }
  return static_cast<std::uint8_t>(result | (sign >> 24));
}

RESHARD_HOST_DEVICE inline std::uint8_t cvt_float_to_f8e5m2(float f) {
  constexpr std::uint32_t kInfBits = 0xffu << 23;
  constexpr std::uint32_t kInfFrom = 143u << 23;     // 65536.0f
  constexpr std::uint32_t kDenormMask = 134u << 23;  // 2^7
  constexpr std::uint32_t kMinNormal = 113u << 23;   // 2^-14
  std::uint32_t bits = cvt_float_bits(f);
  const std::uint32_t sign = bits & 0x80000000u;
  bits ^= sign;
  std::uint8_t result;
  if (bits >= kInfFrom) {
    result = bits > kInfBits ? 0x7f : 0x7c;
  } else if (bits < kMinNormal) {
    bits = cvt_float_bits(cvt_bits_float(bits) + cvt_bits_float(kDenormMask));
    result = static_cast<std::uint8_t>(bits - kDenormMask);
  } else {
    const std::uint32_t mant_odd = (bits >> 21) & 1u;
    bits += (static_cast<std::uint32_t>(15 - 127) << 23) + 0xfffffu;
    bits += mant_odd;
    result = static_cast<std::uint8_t>(bits >> 21);
  }
  return static_cast<std::uint8_t>(result | (sign >> 24));
}

// An element of a floating dtype as f32 (exact but for f64, which the C++ cast rounds).
template <class T>
RESHARD_HOST_DEVICE inline float cvt_to_float(T v) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) return static_cast<float>(v);
  if constexpr (std::is_same_v<T, Float16>) return cvt_f16_to_float(v.bits);
  if constexpr (std::is_same_v<T, BFloat16>) return cvt_bf16_to_float(v.bits);
  if constexpr (std::is_same_v<T, Float8E4M3>) return cvt_f8e4m3_to_float(v.bits);
  if constexpr (std::is_same_v<T, Float8E5M2>) return cvt_f8e5m2_to_float(v.bits);
}

template <class T>
RESHARD_HOST_DEVICE inline T cvt_from_float(float f) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) return static_cast<T>(f);
  if constexpr (std::is_same_v<T, Float16>) return Float16{cvt_float_to_f16(f)};
  if constexpr (std::is_same_v<T, BFloat16>) return BFloat16{cvt_float_to_bf16(f)};
  if constexpr (std::is_same_v<T, Float8E4M3>) return Float8E4M3{cvt_float_to_f8e4m3(f)};
  if constexpr (std::is_same_v<T, Float8E5M2>) return Float8E5M2{cvt_float_to_f8e5m2(f)};
}

// Whether T is an element type convert_value takes.
template <class T>
inline constexpr bool kConvertibleElement =
    std::is_same_v<T, double> || std::is_same_v<T, float> || std::is_same_v<T, Float16> ||
    std::is_same_v<T, BFloat16> || std::is_same_v<T, Float8E4M3> || std::is_same_v<T, Float8E5M2>;

// One element of From as To, by the rules above.
template <class From, class To>
RESHARD_HOST_DEVICE inline To convert_value(From v) {
  if constexpr (std::is_same_v<From, To>) {
    return v;
  } else if constexpr (std::is_same_v<To, double> && std::is_same_v<From, float>) {
    return static_cast<double>(v);
  } else if constexpr (std::is_same_v<To, double>) {
    return static_cast<double>(cvt_to_float(v));
  } else {
    return cvt_from_float<To>(cvt_to_float(v));
  }
}

}  // namespace detail
}  // namespace reshard
