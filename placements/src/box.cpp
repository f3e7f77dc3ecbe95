#include "reshard/box.hpp"

#include <algorithm>

namespace reshard {
namespace {

// Box ends (offset + extent) and differences are computed in 128 bits: a box read from a file may hold any int64
// values, and a wrapped end must never make a box look contained or overlapping.
__extension__ typedef __int128 Wide;

Wide end_of(const Box& b, int d) { return Wide(b.offset[d]) + Wide(b.shape[d]); }

std::string wide_string(Wide v) {
  if (v == 0) return "0";
  const bool negative = v < 0;
  std::string s;
  while (v != 0) {
    const int digit = static_cast<int>(v % 10);
    s += static_cast<char>('0' + (digit < 0 ? -digit : digit));
    v /= 10;
  }
  if (negative) s += '-';
  return {s.rbegin(), s.rend()};
}

}  // namespace

Box whole(const Dims& shape) { return Box{Dims(shape.size(), 0), shape}; }

namespace detail {

void volume_overflow(const Box& b) {
  fail(ErrorKind::kInvalidArgument, cat("box ", to_string(b), " has more elements than fit in 64 bits"));
}

Box intersect_wide(const Box& a, const Box& b) {
  RESHARD_REQUIRE(a.ndim() == b.ndim(), "cannot intersect a ", a.ndim(), "-D box with a ", b.ndim(), "-D box");
  Box r{a.shape, a.shape};
  for (int i = 0; i < a.ndim(); ++i) {
    const Index lo = std::max(a.offset[i], b.offset[i]);
    const Wide extent = std::max<Wide>(0, std::min(end_of(a, i), end_of(b, i)) - Wide(lo));
    RESHARD_REQUIRE(extent <= Wide(INT64_MAX), "the intersection of ", to_string(a), " and ", to_string(b),
                    " has an extent beyond 64 bits");
    r.offset[i] = lo;
    r.shape[i] = static_cast<Index>(extent);
  }
  return r;
}

}  // namespace detail

bool contains(const Box& outer, const Box& inner) {
  if (is_empty(inner)) return true;
  if (outer.ndim() != inner.ndim()) return false;
  for (int i = 0; i < inner.ndim(); ++i) {
    if (inner.offset[i] < outer.offset[i]) return false;
    if (end_of(inner, i) > end_of(outer, i)) return false;
  }
  return true;
}

Index local_offset(const Box& owner, const Box& inner) {
  Index off = 0;
  for (int i = 0; i < owner.ndim(); ++i) {
    Index delta = 0;
    if (!try_mul(off, owner.shape[i], off) || !try_sub(inner.offset[i], owner.offset[i], delta) ||
        !try_add(off, delta, off))
      fail(ErrorKind::kInvalidArgument,
           cat("the offset of ", to_string(inner), " inside ", to_string(owner), " does not fit in 64 bits"));
  }
  return off;
}

std::string to_string(const Box& b) {
  std::string s = "[";
  for (int i = 0; i < b.ndim(); ++i) {
    if (i) s += ", ";
    s += std::to_string(b.offset[i]) + ":" + wide_string(end_of(b, i));
  }
  s += "]";
  if (is_empty(b)) s += " (empty)";
  return s;
}

}  // namespace reshard
