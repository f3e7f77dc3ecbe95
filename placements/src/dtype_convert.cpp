#include "reshard/dtype_convert.hpp"

#include <cstring>

#include "reshard/error.hpp"
#include "reshard/text.hpp"

namespace reshard {
namespace {

bool floating_convertible(DType d) {
  return d == DType::kF64 || d == DType::kF32 || d == DType::kF16 || d == DType::kBF16 || d == DType::kF8E4M3 ||
         d == DType::kF8E5M2;
}

// Calls f(From{}, To{}) with the element types of a convertible pair (or of from == to).
template <class F>
void visit_pair(DType from, DType to, F&& f) {
  visit_dtype(from, [&](auto from_tag) {
    visit_dtype(to, [&](auto to_tag) {
      using From = typename decltype(from_tag)::type;
      using To = typename decltype(to_tag)::type;
      if constexpr (detail::kConvertibleElement<From> && detail::kConvertibleElement<To>) {
        f(From{}, To{});
      } else {
        fail(ErrorKind::kInternal, cat("no conversion from ", to_string(from), " to ", to_string(to)));
      }
    });
  });
}

}  // namespace

bool convertible(DType from, DType to) { return from != to && floating_convertible(from) && floating_convertible(to); }

void require_convertible(DType from, DType to) {
  RESHARD_REQUIRE(from != to, "to_dtype ", to_string(to), " is the source dtype: a plan without conversion has none");
  RESHARD_REQUIRE(convertible(from, to), "cannot convert ", to_string(from), " to ", to_string(to),
                  " in a redistribution: conversion is defined between the floating dtypes f64 f32 f16 bf16 f8e4m3 "
                  "f8e5m2 only (integers, bool and c64 are moved unchanged)");
}

void convert_elements(const void* src, DType from, void* dst, DType to, std::int64_t count) {
  if (count <= 0) return;
  if (from == to) {
    std::memmove(dst, src, static_cast<size_t>(count) * static_cast<size_t>(element_size(from)));
    return;
  }
  visit_pair(from, to, [&](auto from_v, auto to_v) {
    using From = decltype(from_v);
    using To = decltype(to_v);
    const auto* in = static_cast<const unsigned char*>(src);
    auto* out = static_cast<unsigned char*>(dst);
    for (std::int64_t i = 0; i < count; ++i) {
      From v;
      std::memcpy(&v, in + i * static_cast<std::int64_t>(sizeof(From)), sizeof(From));
      const To w = detail::convert_value<From, To>(v);
      std::memcpy(out + i * static_cast<std::int64_t>(sizeof(To)), &w, sizeof(To));
    }
  });
}

std::uint64_t convert_bits(std::uint64_t bits, DType from, DType to) {
  std::uint64_t out = 0;
  convert_elements(&bits, from, &out, to, 1);  // little-endian: the low bytes
  return out;
}

}  // namespace reshard
