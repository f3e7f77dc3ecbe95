// Element types of the tensors reshard moves, and the one mapping from a DType to its element type (visit_dtype).
//
// Every dtype moves as bytes. Reductions (Partial placements) are defined for f64 f32 f16 bf16 i64 i32 i8 u8 with
// sum, avg, max and min, and for c64 with sum and avg (as pairs of f32, as NCCL and PyTorch reduce them); fp8, bool
// and i16 cannot be Partial (see reducible()).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "reshard/detail/host_device.hpp"
#include "reshard/placement.hpp"

namespace reshard {

// New dtypes are appended: the numeric values are stable (the CUDA kernels and the test pattern see them).
enum class DType : std::uint8_t {
  kF64,
  kF32,
  kF16,
  kBF16,
  kI64,
  kI32,
  kI8,
  kU8,
  kF8E4M3,  // float8_e4m3fn: no infinities, NaN = S.1111.111
  kF8E5M2,  // float8_e5m2: IEEE-like, 5 exponent bits, 2 mantissa bits
  kBool,    // one byte, 0 or 1
  kI16,
  kC64,  // complex64: two f32, real part first
};

inline constexpr DType kAllDTypes[] = {DType::kF64,  DType::kF32, DType::kF16, DType::kBF16,   DType::kI64,
                                       DType::kI32,  DType::kI8,  DType::kU8,  DType::kF8E4M3, DType::kF8E5M2,
                                       DType::kBool, DType::kI16, DType::kC64};

// Element types without a C++ arithmetic type of their own: their bits. The code that computes with them converts
// (reshard/detail/half.hpp on the host, CUDA intrinsics in kernels).
struct Float16 {
  std::uint16_t bits;
};
struct BFloat16 {
  std::uint16_t bits;
};
struct Float8E4M3 {
  std::uint8_t bits;
};
struct Float8E5M2 {
  std::uint8_t bits;
};
struct Complex64 {
  float re, im;
};

namespace detail {
template <DType D>
struct ElementOf;
// clang-format off
template <> struct ElementOf<DType::kF64> { using type = double; };
template <> struct ElementOf<DType::kF32> { using type = float; };
template <> struct ElementOf<DType::kF16> { using type = Float16; };
template <> struct ElementOf<DType::kBF16> { using type = BFloat16; };
template <> struct ElementOf<DType::kI64> { using type = std::int64_t; };
template <> struct ElementOf<DType::kI32> { using type = std::int32_t; };
template <> struct ElementOf<DType::kI8> { using type = std::int8_t; };
template <> struct ElementOf<DType::kU8> { using type = std::uint8_t; };
template <> struct ElementOf<DType::kF8E4M3> { using type = Float8E4M3; };
template <> struct ElementOf<DType::kF8E5M2> { using type = Float8E5M2; };
template <> struct ElementOf<DType::kBool> { using type = bool; };
template <> struct ElementOf<DType::kI16> { using type = std::int16_t; };
template <> struct ElementOf<DType::kC64> { using type = Complex64; };
// clang-format on

[[noreturn]] void throw_bad_dtype(int value);
}  // namespace detail

// What visit_dtype passes: the dtype as a constant and its element type.
template <DType D>
struct DTypeTag {
  static constexpr DType dtype = D;
  using type = typename detail::ElementOf<D>::type;
};

// Calls f(DTypeTag<D>{}) for the D equal to `dtype`; every call must return the same type. The one switch over
// dtypes: code that depends on the element type visits instead of switching.
template <class F>
RESHARD_HOST_DEVICE constexpr decltype(auto) visit_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF64:
      return f(DTypeTag<DType::kF64>{});
    case DType::kF32:
      return f(DTypeTag<DType::kF32>{});
    case DType::kF16:
      return f(DTypeTag<DType::kF16>{});
    case DType::kBF16:
      return f(DTypeTag<DType::kBF16>{});
    case DType::kI64:
      return f(DTypeTag<DType::kI64>{});
    case DType::kI32:
      return f(DTypeTag<DType::kI32>{});
    case DType::kI8:
      return f(DTypeTag<DType::kI8>{});
    case DType::kU8:
      return f(DTypeTag<DType::kU8>{});
    case DType::kF8E4M3:
      return f(DTypeTag<DType::kF8E4M3>{});
    case DType::kF8E5M2:
      return f(DTypeTag<DType::kF8E5M2>{});
    case DType::kBool:
      return f(DTypeTag<DType::kBool>{});
    case DType::kI16:
      return f(DTypeTag<DType::kI16>{});
    case DType::kC64:
      return f(DTypeTag<DType::kC64>{});
  }
#ifdef __CUDA_ARCH__
  __trap();
#else
  detail::throw_bad_dtype(static_cast<int>(dtype));
#endif
}

RESHARD_HOST_DEVICE constexpr int element_size(DType dtype) {
  return visit_dtype(dtype, [](auto tag) { return static_cast<int>(sizeof(typename decltype(tag)::type)); });
}

// Floating-point elements (complex64 included): a Partial(sum) created from a replicated value divides it.
bool is_floating(DType dtype);
// Whether Partial(op) is defined on the dtype: every op on f64 f32 f16 bf16 i64 i32 i8 u8; sum and avg on c64
// (reduced as pairs of f32); nothing on fp8, bool and i16.
bool reducible(DType dtype, ReduceOp op);
// kInvalidArgument naming the dtype and the op when !reducible(dtype, op).
void require_reducible(DType dtype, ReduceOp op);
// Canonical short name: f64 f32 f16 bf16 i64 i32 i8 u8 f8e4m3 f8e5m2 bool i16 c64.
std::string_view to_string(DType dtype);
// Accepts the short names and PyTorch's spellings, with or without "torch." (float32, bfloat16, int64, uint8,
// float8_e4m3fn, complex64, ...); docs/api.md lists them all. kParse error otherwise.
DType parse_dtype(std::string_view text);

}  // namespace reshard
