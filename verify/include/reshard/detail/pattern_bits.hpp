// The deterministic test tensor shared by tests, `reshard run` and the benchmarks, on the host and in CUDA kernels.
// Element i (row-major global index) holds bits hashed from i, so a misplaced element is caught:
//  - f64 f32 f16 bf16 and integers: a small integer, exactly representable in its dtype (|v| < 128 for 8-bit
//    types and bf16, < 1024 for f16, < 2^15 for i16, < 2^23 otherwise), so sums of them compare bit for bit;
//  - c64: two such f32 integers (real part from lane 0, imaginary part from lane 1);
//  - bool: 0 or 1;
//  - fp8: any finite encoding (e4m3fn: every byte but the NaNs 0x7f and 0xff; e5m2: every byte but the infinities
//    and NaNs 0x7c..0x7f and 0xfc..0xff).
#pragma once

#include <cstdint>

#include "reshard/detail/host_device.hpp"
#include "reshard/dtype.hpp"

namespace reshard::detail {

RESHARD_HOST_DEVICE inline std::uint64_t pattern_hash(std::int64_t i) {
  std::uint64_t h = static_cast<std::uint64_t>(i) * 0x9E3779B97F4A7C15ull;
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  return h;
}

// Number of integer values an element is made of: 2 for complex64, 1 otherwise.
RESHARD_HOST_DEVICE constexpr int pattern_lanes(DType dtype) { return dtype == DType::kC64 ? 2 : 1; }

// The integer value of lane `lane` of element i (for fp8, the encoding's byte; for bool, 0 or 1).
RESHARD_HOST_DEVICE inline std::int64_t pattern_int(std::int64_t i, DType dtype, int lane = 0) {
  const std::uint64_t h = pattern_hash(dtype == DType::kC64 ? 2 * i + lane : i);
  const auto centered = [h](std::uint64_t half_range) {  // in [-half_range, half_range]
    return static_cast<std::int64_t>(h % (2 * half_range + 1)) - static_cast<std::int64_t>(half_range);
  };
  return visit_dtype(dtype, [&](auto tag) -> std::int64_t {
    constexpr DType d = decltype(tag)::dtype;
    if constexpr (d == DType::kF16) return centered(1023);
    if constexpr (d == DType::kBF16 || d == DType::kI8) return centered(127);
    if constexpr (d == DType::kU8) return static_cast<std::int64_t>(h % 256);
    if constexpr (d == DType::kI16) return centered(32767);
    if constexpr (d == DType::kBool) return static_cast<std::int64_t>(h & 1);
    if constexpr (d == DType::kF8E4M3) {  // 254 encodings: skip 0x7f (and never reach 0xff)
      const std::int64_t b = static_cast<std::int64_t>(h % 254);
      return b >= 0x7f ? b + 1 : b;
    }
    if constexpr (d == DType::kF8E5M2) {  // 248 finite encodings: skip 0x7c..0x7f (and never reach 0xfc)
      const std::int64_t b = static_cast<std::int64_t>(h % 248);
      return b >= 0x7c ? b + 4 : b;
    }
    return centered((1 << 23) - 1);  // f64 f32 c64 i64 i32
  });
}

// Bits of the float with integer value v (|v| < 2^mant_bits), for a format with the given widths.
RESHARD_HOST_DEVICE inline std::uint64_t int_to_float_bits(std::int64_t v, int exp_bits, int mant_bits) {
  if (v == 0) return 0;
  std::uint64_t sign = v < 0 ? 1 : 0;
  std::uint64_t a = static_cast<std::uint64_t>(v < 0 ? -v : v);
  int e = 63;
  while (!((a >> e) & 1)) --e;
  std::uint64_t bias = (1ull << (exp_bits - 1)) - 1;
  std::uint64_t mant = (a << (mant_bits - e)) & ((1ull << mant_bits) - 1);
  return sign << (exp_bits + mant_bits) | (static_cast<std::uint64_t>(e) + bias) << mant_bits | mant;
}

// The bits element i holds (the low element-size bytes are significant; little-endian, so complex64's real part
// is the low word).
RESHARD_HOST_DEVICE inline std::uint64_t pattern_bits(std::int64_t i, DType dtype) {
  const std::int64_t v = pattern_int(i, dtype);
  return visit_dtype(dtype, [&](auto tag) -> std::uint64_t {
    constexpr DType d = decltype(tag)::dtype;
    if constexpr (d == DType::kF64) return int_to_float_bits(v, 11, 52);
    if constexpr (d == DType::kF32) return int_to_float_bits(v, 8, 23);
    if constexpr (d == DType::kF16) return int_to_float_bits(v, 5, 10);
    if constexpr (d == DType::kBF16) return int_to_float_bits(v, 8, 7);
    if constexpr (d == DType::kC64)
      return int_to_float_bits(v, 8, 23) | int_to_float_bits(pattern_int(i, dtype, 1), 8, 23) << 32;
    return static_cast<std::uint64_t>(v);  // integers (two's complement, truncated), bool, fp8 encodings
  });
}

}  // namespace reshard::detail
