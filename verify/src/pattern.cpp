#include "reshard/pattern.hpp"

#include <cstring>

#include "box_walk.hpp"
#include "reshard/detail/half.hpp"
#include "reshard/detail/pattern_bits.hpp"
#include "reshard/dtype_convert.hpp"

namespace reshard {

void fill_pattern(void* data, const Box& box, const Dims& global_shape, DType dtype) {
  const int es = element_size(dtype);
  auto* out = static_cast<unsigned char*>(data);
  detail::for_each_element(box, global_shape, [&](Index local, Index global) {
    std::uint64_t bits = detail::pattern_bits(global, dtype);
    std::memcpy(out + local * es, &bits, es);  // little-endian: the low bytes
  });
}

Index count_mismatches(const void* data, const Box& box, const Dims& global_shape, DType dtype) {
  const int es = element_size(dtype);
  const auto* in = static_cast<const unsigned char*>(data);
  Index wrong = 0;
  detail::for_each_element(box, global_shape, [&](Index local, Index global) {
    std::uint64_t want = detail::pattern_bits(global, dtype), got = 0;
    std::memcpy(&got, in + local * es, es);
    if (es < 8) want &= (std::uint64_t(1) << (8 * es)) - 1;
    wrong += got != want;
  });
  return wrong;
}

Index count_mismatches(const void* data, const Box& box, const Dims& global_shape, DType dtype, DType to_dtype) {
  if (to_dtype == dtype) return count_mismatches(data, box, global_shape, dtype);
  const int es = element_size(to_dtype);
  const auto* in = static_cast<const unsigned char*>(data);
  Index wrong = 0;
  detail::for_each_element(box, global_shape, [&](Index local, Index global) {
    std::uint64_t want = convert_bits(detail::pattern_bits(global, dtype), dtype, to_dtype), got = 0;
    std::memcpy(&got, in + local * es, es);
    if (es < 8) want &= (std::uint64_t(1) << (8 * es)) - 1;
    wrong += got != want;
  });
  return wrong;
}

double pattern_value(Index global_index, DType dtype) {
  const std::int64_t v = detail::pattern_int(global_index, dtype);
  if (dtype == DType::kF8E4M3) return detail::f8e4m3_to_float(static_cast<std::uint8_t>(v));
  if (dtype == DType::kF8E5M2) return detail::f8e5m2_to_float(static_cast<std::uint8_t>(v));
  return static_cast<double>(v);  // complex64: the real part
}

}  // namespace reshard
