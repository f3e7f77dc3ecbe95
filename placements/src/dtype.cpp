#include "reshard/dtype.hpp"

#include <type_traits>

#include "reshard/text.hpp"

#include "reshard/error.hpp"

namespace reshard {
namespace {

struct Alias {
  std::string_view name;
  DType dtype;
};

// The first name of each dtype is its canonical one.
constexpr Alias kAliases[] = {
    {"f64", DType::kF64},
    {"fp64", DType::kF64},
    {"float64", DType::kF64},
    {"double", DType::kF64},
    {"f32", DType::kF32},
    {"fp32", DType::kF32},
    {"float32", DType::kF32},
    {"float", DType::kF32},
    {"f16", DType::kF16},
    {"fp16", DType::kF16},
    {"float16", DType::kF16},
    {"half", DType::kF16},
    {"bf16", DType::kBF16},
    {"bfloat16", DType::kBF16},
    {"i64", DType::kI64},
    {"int64", DType::kI64},
    {"long", DType::kI64},
    {"i32", DType::kI32},
    {"int32", DType::kI32},
    {"int", DType::kI32},
    {"i8", DType::kI8},
    {"int8", DType::kI8},
    {"u8", DType::kU8},
    {"uint8", DType::kU8},
    {"f8e4m3", DType::kF8E4M3},
    {"float8_e4m3fn", DType::kF8E4M3},
    {"fp8_e4m3", DType::kF8E4M3},
    {"f8e5m2", DType::kF8E5M2},
    {"float8_e5m2", DType::kF8E5M2},
    {"fp8_e5m2", DType::kF8E5M2},
    {"bool", DType::kBool},
    {"i16", DType::kI16},
    {"int16", DType::kI16},
    {"short", DType::kI16},
    {"c64", DType::kC64},
    {"complex64", DType::kC64},
    {"cfloat", DType::kC64},
};

template <class T>
constexpr bool kFloatingElement =
    std::is_floating_point_v<T> || std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16> ||
    std::is_same_v<T, Float8E4M3> || std::is_same_v<T, Float8E5M2> || std::is_same_v<T, Complex64>;

}  // namespace

namespace detail {
void throw_bad_dtype(int value) { fail(ErrorKind::kInternal, cat("dtype value ", value, " is not a DType")); }
}  // namespace detail

bool is_floating(DType dtype) {
  return visit_dtype(dtype, [](auto tag) { return kFloatingElement<typename decltype(tag)::type>; });
}

bool reducible(DType dtype, ReduceOp op) {
  return visit_dtype(dtype, [op](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, Complex64>) return op == ReduceOp::kSum || op == ReduceOp::kAvg;
    if constexpr (std::is_same_v<T, Float8E4M3> || std::is_same_v<T, Float8E5M2> || std::is_same_v<T, bool> ||
                  std::is_same_v<T, std::int16_t>)
      return false;
    return true;
  });
}

void require_reducible(DType dtype, ReduceOp op) {
  if (reducible(dtype, op)) return;
  const bool complex = dtype == DType::kC64;
  fail(ErrorKind::kInvalidArgument,
       cat("Partial(", to_string(op), ") is not supported on ", to_string(dtype), " tensors: ",
           complex ? "complex64 reduces with sum and avg only"
                   : "fp8, bool and i16 tensors move as bytes and cannot be reduced (no NCCL reduction for them)"));
}

std::string_view to_string(DType dtype) {
  for (const Alias& a : kAliases)
    if (a.dtype == dtype) return a.name;
  return "?";
}

DType parse_dtype(std::string_view text) {
  std::string_view name = text;
  if (name.substr(0, 6) == "torch.") name.remove_prefix(6);
  for (const Alias& a : kAliases)
    if (a.name == name) return a.dtype;
  fail(ErrorKind::kParse, cat("unknown dtype '", printable(text),
                              "'; expected one of f64 f32 f16 bf16 i64 i32 i16 i8 u8 bool f8e4m3 f8e5m2 c64 (or "
                              "PyTorch's names such as torch.float32, bfloat16, float8_e4m3fn, complex64)"));
}

}  // namespace reshard
