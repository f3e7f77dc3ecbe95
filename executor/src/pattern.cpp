#include "reshard/pattern.hpp"

#include <cstring>

#include "reshard/detail/pattern_bits.hpp"

namespace reshard {
namespace {

// Calls f(local index, global index) for every element of the box, row-major.
template <class F>
void for_each(const Box& box, const Dims& global_shape, F f) {
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

}  // namespace

void fill_pattern(void* data, const Box& box, const Dims& global_shape, DType dtype) {
  const int es = element_size(dtype), code = static_cast<int>(dtype);
  auto* out = static_cast<unsigned char*>(data);
  for_each(box, global_shape, [&](Index local, Index global) {
    std::uint64_t bits = detail::pattern_bits(global, code);
    std::memcpy(out + local * es, &bits, es);  // little-endian: the low bytes
  });
}

Index count_mismatches(const void* data, const Box& box, const Dims& global_shape, DType dtype) {
  const int es = element_size(dtype), code = static_cast<int>(dtype);
  const auto* in = static_cast<const unsigned char*>(data);
  Index wrong = 0;
  for_each(box, global_shape, [&](Index local, Index global) {
    std::uint64_t want = detail::pattern_bits(global, code), got = 0;
    std::memcpy(&got, in + local * es, es);
    if (es < 8) want &= (std::uint64_t(1) << (8 * es)) - 1;
    wrong += got != want;
  });
  return wrong;
}

double pattern_value(Index global_index, DType dtype) {
  return static_cast<double>(detail::pattern_int(global_index, static_cast<int>(dtype)));
}

}  // namespace reshard
