// Box: an axis-aligned block of a tensor, given by a global offset and a shape.
//
// Contracts (tested element by element in tests/box_test.cpp):
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

#include "reshard/dims.hpp"

namespace reshard {

struct Box {
  Dims offset;
  Dims shape;

  int ndim() const { return shape.size(); }
  friend bool operator==(const Box& a, const Box& b) { return a.offset == b.offset && a.shape == b.shape; }
};

// A box of the given shape at offset 0.
Box whole(const Dims& shape);
Index volume(const Box& b);
bool is_empty(const Box& b);
Box intersect(const Box& a, const Box& b);
bool contains(const Box& outer, const Box& inner);
// Offset of the box's first element inside the owner's dense row-major local tensor. `inner` must lie in owner.
Index local_offset(const Box& owner, const Box& inner);
// Whether the elements of `inner` form one contiguous run inside the owner's dense row-major tensor.
bool is_contiguous_in(const Box& owner, const Box& inner);
// "[0:4, 2:5]" (half-open ranges per dim); "[]" for a 0-D box; "(empty)" suffix when empty.
std::string to_string(const Box& b);

}  // namespace reshard
