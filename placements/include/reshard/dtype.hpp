// Element types of the tensors reshard moves.
#pragma once

#include <string>
#include <string_view>

namespace reshard {

enum class DType { kF64, kF32, kF16, kBF16, kI64, kI32, kI8, kU8 };

inline constexpr DType kAllDTypes[] = {DType::kF64, DType::kF32, DType::kF16, DType::kBF16,
                                       DType::kI64, DType::kI32, DType::kI8,  DType::kU8};

int element_size(DType dtype);
bool is_floating(DType dtype);
// Canonical short name: f64 f32 f16 bf16 i64 i32 i8 u8.
std::string_view to_string(DType dtype);
// Accepts the short names and the PyTorch spellings (float32, bfloat16, int64, uint8, ...).
DType parse_dtype(std::string_view text);

}  // namespace reshard
