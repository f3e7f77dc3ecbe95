// Overflow-checked integer arithmetic for sizes and products (shapes, meshes, byte counts, figures summed over ranks).
//
// Every derived figure goes through these: a product or sum that does not fit in int64 is an error naming what was
// being computed (never a wrapped, negative or undefined value). The try_ forms report overflow without throwing,
// for comparisons that must simply fail (box containment).
#pragma once

#include <cstdint>
#include <string_view>

#include "reshard/error.hpp"

namespace reshard {

using Index = std::int64_t;

// a + b, a - b, a * b: false on overflow (out is then unspecified).
constexpr bool try_add(Index a, Index b, Index& out) { return !__builtin_add_overflow(a, b, &out); }
constexpr bool try_sub(Index a, Index b, Index& out) { return !__builtin_sub_overflow(a, b, &out); }
constexpr bool try_mul(Index a, Index b, Index& out) { return !__builtin_mul_overflow(a, b, &out); }

// a * b, or an kInvalidArgument error naming `what` when the product does not fit in int64.
inline Index checked_mul(Index a, Index b, std::string_view what) {
  Index r = 0;
  if (!try_mul(a, b, r)) fail(ErrorKind::kInvalidArgument, cat(what, " overflows 64-bit integers"));
  return r;
}

inline Index checked_add(Index a, Index b, std::string_view what) {
  Index r = 0;
  if (!try_add(a, b, r)) fail(ErrorKind::kInvalidArgument, cat(what, " overflows 64-bit integers"));
  return r;
}

// a * b * c (e.g. volume x (n - 1) x element size).
inline Index checked_mul(Index a, Index b, Index c, std::string_view what) {
  return checked_mul(checked_mul(a, b, what), c, what);
}

// ceil(a / b) for a >= 0, b > 0.
constexpr Index ceil_div(Index a, Index b) { return a / b + (a % b != 0 ? 1 : 0); }

}  // namespace reshard
