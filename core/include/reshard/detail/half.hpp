// IEEE half (f16) and bfloat16 conversions on the host, round-to-nearest-even; fp8 (e4m3fn, e5m2) decoding.
#pragma once

#include <cstdint>
#include <cstring>

namespace reshard::detail {

inline std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float bits_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float bf16_to_float(std::uint16_t h) { return bits_float(static_cast<std::uint32_t>(h) << 16); }

inline std::uint16_t float_to_bf16(float f) {
  std::uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

inline float f16_to_float(std::uint16_t h) {
  std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) {
    if (mant == 0) return bits_float(sign);
    // Subnormal: normalise.
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    mant &= 0x3ffu;
    return bits_float(sign | static_cast<std::uint32_t>(127 - 15 - e) << 23 | mant << 13);
  }
  if (exp == 31) return bits_float(sign | 0x7f800000u | mant << 13);
  return bits_float(sign | (exp + 127 - 15) << 23 | mant << 13);
}

inline std::uint16_t float_to_f16(float f) {
  std::uint32_t u = float_bits(f);
  std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  std::uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // overflow (rounds to >= 65520) -> inf
  if (abs < 0x38800000u) {                        // subnormal or zero in f16
    if (abs < 0x33000000u) return sign;           // rounds to zero
    std::uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    int shift = 126 - static_cast<int>(abs >> 23);  // value = mant * 2^(exp - 150) = half_mant * 2^-24
    std::uint32_t half_mant = mant >> shift;
    std::uint32_t rem = mant & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_mant & 1u))) ++half_mant;
    return sign | static_cast<std::uint16_t>(half_mant);
  }
  std::uint32_t r = abs - 0x38000000u;  // rebias exponent 127 -> 15
  r += 0xfffu + ((r >> 13) & 1u);       // round to nearest even at bit 13
  return sign | static_cast<std::uint16_t>(r >> 13);
}

// float8_e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities; S.1111.111 is NaN.
inline float f8e4m3_to_float(std::uint8_t b) {
  const std::uint32_t sign = static_cast<std::uint32_t>(b & 0x80u) << 24;
  const std::uint32_t exp = (b >> 3) & 0xfu, mant = b & 0x7u;
  if (exp == 0xf && mant == 0x7) return bits_float(sign | 0x7fc00000u);
  if (exp == 0) return bits_float(sign) + (sign ? -1.0f : 1.0f) * static_cast<float>(mant) / 512.0f;  // m * 2^-9
  return bits_float(sign | (exp + 127 - 7) << 23 | mant << 20);
}

// float8_e5m2: 1 sign, 5 exponent (bias 15), 2 mantissa bits, infinities and NaNs as IEEE: the high byte of an f16.
inline float f8e5m2_to_float(std::uint8_t b) { return f16_to_float(static_cast<std::uint16_t>(b) << 8); }

}  // namespace reshard::detail
