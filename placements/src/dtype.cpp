#include "reshard/dtype.hpp"

#include "reshard/text.hpp"

#include "reshard/error.hpp"

namespace reshard {

int element_size(DType dtype) {
  switch (dtype) {
    case DType::kF64:
    case DType::kI64:
      return 8;
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kI8:
    case DType::kU8:
      return 1;
  }
  fail(ErrorKind::kInternal, "unknown dtype");
}

bool is_floating(DType dtype) {
  return dtype == DType::kF64 || dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16;
}

std::string_view to_string(DType dtype) {
  switch (dtype) {
    case DType::kF64:
      return "f64";
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
    case DType::kI64:
      return "i64";
    case DType::kI32:
      return "i32";
    case DType::kI8:
      return "i8";
    case DType::kU8:
      return "u8";
  }
  return "?";
}

DType parse_dtype(std::string_view text) {
  struct Alias {
    std::string_view name;
    DType dtype;
  };
  static constexpr Alias kAliases[] = {
      {"f64", DType::kF64},     {"float64", DType::kF64}, {"double", DType::kF64},    {"f32", DType::kF32},
      {"float32", DType::kF32}, {"float", DType::kF32},   {"f16", DType::kF16},       {"float16", DType::kF16},
      {"half", DType::kF16},    {"bf16", DType::kBF16},   {"bfloat16", DType::kBF16}, {"i64", DType::kI64},
      {"int64", DType::kI64},   {"i32", DType::kI32},     {"int32", DType::kI32},     {"i8", DType::kI8},
      {"int8", DType::kI8},     {"u8", DType::kU8},       {"uint8", DType::kU8},
  };
  for (const Alias& a : kAliases)
    if (a.name == text) return a.dtype;
  fail(ErrorKind::kParse, cat("unknown dtype '", printable(text), "'; expected one of f64 f32 f16 bf16 i64 i32 i8 u8"));
}

}  // namespace reshard
