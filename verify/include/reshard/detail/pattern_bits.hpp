// The deterministic test tensor shared by tests, `reshard run` and the benchmarks, on the host and in CUDA kernels.
// Element i (row-major global index) holds a small integer hashed from i, exactly representable in its dtype
// (|v| < 128 for 8-bit and bf16 types, < 1024 for f16, < 2^23 otherwise), so results compare bit for bit.
#pragma once

#include <cstdint>

#include "reshard/detail/host_device.hpp"

namespace reshard::detail {

// dtype codes follow reshard::DType's order: f64 f32 f16 bf16 i64 i32 i8 u8.
RESHARD_HOST_DEVICE inline std::int64_t pattern_int(std::int64_t i, int dtype_code) {
  std::uint64_t h = static_cast<std::uint64_t>(i) * 0x9E3779B97F4A7C15ull;
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  switch (dtype_code) {
    case 2:  // f16: |v| < 1024
      return static_cast<std::int64_t>(h % 2047) - 1023;
    case 3:  // bf16
    case 6:  // i8
      return static_cast<std::int64_t>(h % 255) - 127;
    case 7:  // u8
      return static_cast<std::int64_t>(h % 256);
    default:  // f64 f32 i64 i32: |v| < 2^23
      return static_cast<std::int64_t>(h % ((1u << 24) - 1)) - ((1 << 23) - 1);
  }
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

// The bits element i holds (low element-size bytes are significant).
RESHARD_HOST_DEVICE inline std::uint64_t pattern_bits(std::int64_t i, int dtype_code) {
  std::int64_t v = pattern_int(i, dtype_code);
  switch (dtype_code) {
    case 0:
      return int_to_float_bits(v, 11, 52);
    case 1:
      return int_to_float_bits(v, 8, 23);
    case 2:
      return int_to_float_bits(v, 5, 10);
    case 3:
      return int_to_float_bits(v, 8, 7);
    default:
      return static_cast<std::uint64_t>(v);  // two's complement; truncated to the element size
  }
}

}  // namespace reshard::detail
