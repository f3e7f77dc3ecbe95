// Box: an axis-aligned block of a tensor, given by a global offset and a shape.
//
// Contracts (tested element by element in tests/placements/box_test.cpp):
//  - volume(b) is the product of the extents; a box with any zero (or negative) extent is empty, volume 0. A volume
//    beyond int64 is a kInvalidArgument error, never a wrapped value.
//  - intersect(a, b) contains exactly the elements in both a and b; its offset is max(offsets) per dim
//    and its extent max(0, min(ends) - max(offsets)). An empty result may have any offset.
//  - contains(outer, inner) holds iff every element of inner is in outer (always, for an empty inner).
//  - Boxes may come from files and hold any int64 values: ends (offset + extent) are compared without overflow, so
//    no wrapped end ever makes a box look contained; local_offset fails rather than wrap.
//  - Local (row-major) coordinates: element x of the tensor lives at index
//    sum_d (x_d - owner.offset_d) * row_major_strides(owner.shape)_d of the owner's dense local tensor.
#pragma once

#include <string>

#include "reshard/checked_math.hpp"
#include "reshard/dims.hpp"

namespace reshard {

struct Box {
  Dims offset;
  Dims shape;

  int ndim() const { return shape.size(); }
  friend bool operator==(const Box& a, const Box& b) { return a.offset == b.offset && a.shape == b.shape; }
};

namespace detail {
// The out-of-line paths of the inline functions below: errors, and boxes whose ends overflow int64.
[[noreturn]] void volume_overflow(const Box& b);
Box intersect_wide(const Box& a, const Box& b);
}  // namespace detail

// A box of the given shape at offset 0.
Box whole(const Dims& shape);

// Inline: the planner's inner loops call these per rank pair.
inline Index volume(const Box& b) {
  Index v = 1;
  for (int i = 0; i < b.ndim(); ++i) {
    if (b.shape[i] <= 0) return 0;
    if (!try_mul(v, b.shape[i], v)) detail::volume_overflow(b);
  }
  return v;
}

inline bool is_empty(const Box& b) {
  for (int i = 0; i < b.ndim(); ++i)
    if (b.shape[i] <= 0) return true;
  return false;
}

inline Box intersect(const Box& a, const Box& b) {
  if (a.ndim() != b.ndim()) return detail::intersect_wide(a, b);  // which names the problem
  Box r{a.shape, a.shape};  // ndim() entries each, every one overwritten (copied, not zeroed and filled)
  for (int i = 0; i < a.ndim(); ++i) {
    const Index lo = a.offset[i] > b.offset[i] ? a.offset[i] : b.offset[i];
    Index end_a = 0, end_b = 0, fast = 0;  // in int64 where nothing overflows (every box of a layout)
    if (!try_add(a.offset[i], a.shape[i], end_a) || !try_add(b.offset[i], b.shape[i], end_b) ||
        !try_sub(end_a < end_b ? end_a : end_b, lo, fast))
      return detail::intersect_wide(a, b);
    r.offset[i] = lo;
    r.shape[i] = fast > 0 ? fast : 0;
  }
  return r;
}

bool contains(const Box& outer, const Box& inner);
// Offset of the box's first element inside the owner's dense row-major local tensor. `inner` must lie in owner.
Index local_offset(const Box& owner, const Box& inner);

// Whether the elements of `inner` form one contiguous run inside the owner's dense row-major tensor.
inline bool is_contiguous_in(const Box& owner, const Box& inner) {
  if (is_empty(inner)) return true;
  // Skip leading dims where the inner box has extent 1; the first dim with extent > 1 may be partial, every
  // later dim must be full.
  int i = 0;
  while (i < inner.ndim() && inner.shape[i] == 1) ++i;
  for (int j = i + 1; j < inner.ndim(); ++j)
    if (inner.shape[j] != owner.shape[j]) return false;
  return true;
}
// "[0:4, 2:5]" (half-open ranges per dim); "[]" for a 0-D box; "(empty)" suffix when empty.
std::string to_string(const Box& b);

}  // namespace reshard
