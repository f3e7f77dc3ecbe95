// Overflow-checked integer arithmetic for sizes and products (shapes, meshes, byte counts).
#pragma once

#include <cstdint>
#include <string_view>

#include "reshard/error.hpp"

namespace reshard {

using Index = std::int64_t;

// a * b, or an kInvalidArgument error naming `what` when the product does not fit in int64.
inline Index checked_mul(Index a, Index b, std::string_view what) {
  Index r = 0;
  if (__builtin_mul_overflow(a, b, &r)) fail(ErrorKind::kInvalidArgument, cat(what, " overflows 64-bit integers"));
  return r;
}

inline Index checked_add(Index a, Index b, std::string_view what) {
  Index r = 0;
  if (__builtin_add_overflow(a, b, &r)) fail(ErrorKind::kInvalidArgument, cat(what, " overflows 64-bit integers"));
  return r;
}

// ceil(a / b) for a >= 0, b > 0.
constexpr Index ceil_div(Index a, Index b) { return a / b + (a % b != 0 ? 1 : 0); }

}  // namespace reshard
