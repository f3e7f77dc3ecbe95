#include "reshard/pattern.hpp"

#include <cstring>

#include "box_walk.hpp"
#include "reshard/detail/pattern_bits.hpp"

namespace reshard {

void fill_pattern(void* data, const Box& box, const Dims& global_shape, DType dtype) {
  const int es = element_size(dtype), code = static_cast<int>(dtype);
  auto* out = static_cast<unsigned char*>(data);
  detail::for_each_element(box, global_shape, [&](Index local, Index global) {
    std::uint64_t bits = detail::pattern_bits(global, code);
    std::memcpy(out + local * es, &bits, es);  // little-endian: the low bytes
  });
}

Index count_mismatches(const void* data, const Box& box, const Dims& global_shape, DType dtype) {
  const int es = element_size(dtype), code = static_cast<int>(dtype);
  const auto* in = static_cast<const unsigned char*>(data);
  Index wrong = 0;
  detail::for_each_element(box, global_shape, [&](Index local, Index global) {
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
