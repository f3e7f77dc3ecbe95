// Walking a box of a global tensor element by element (internal to the executor's test pattern).
#pragma once

#include "reshard/box.hpp"

namespace reshard::detail {

// Calls f(local index, global index) for every element of the box, row-major.
template <class F>
void for_each_element(const Box& box, const Dims& global_shape, F f) {
  Index n = volume(box);
  if (n == 0) return;
  const int nd = box.ndim();
  Dims gstride = row_major_strides(global_shape);
  Dims x(nd, 0);
  Index base = 0;
  for (int d = 0; d < nd; ++d) base += box.offset[d] * gstride[d];
  Index row = nd ? box.shape[nd - 1] : 1;
  for (Index i = 0; i < n; i += row) {
    Index g = base;
    for (int d = 0; d + 1 < nd; ++d) g += x[d] * gstride[d];
    for (Index j = 0; j < row; ++j) f(i + j, g + j);
    for (int d = nd - 2; d >= 0; --d) {
      if (++x[d] < box.shape[d]) break;
      x[d] = 0;
    }
  }
}

}  // namespace reshard::detail
