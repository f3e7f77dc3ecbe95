// The NCCL element type and count of a reduction over `count` elements of a DType: complex64 reduces as pairs of
// float32 (a sum or average of complex numbers is the sum or average of their parts, as PyTorch does it over NCCL);
// fp8, bool and i16 cannot be reduced (kInvalidArgument naming the dtype and op, before any NCCL call).
#pragma once

#include <nccl.h>

#include <cstddef>

#include "reshard/detail/reduce_math.hpp"
#include "reshard/dtype.hpp"
#include "reshard/error.hpp"

namespace reshard::detail {

struct NcclElements {
  ncclDataType_t type;
  size_t count;
};

inline NcclElements nccl_elements(DType dtype, size_t count, ReduceOp op) {
  require_reducible(dtype, op);
  const ReduceAs as = reduce_as(dtype);
  const ncclDataType_t type = visit_dtype(as.dtype, [](auto tag) -> ncclDataType_t {
    constexpr DType d = decltype(tag)::dtype;
    if constexpr (d == DType::kF64) return ncclFloat64;
    if constexpr (d == DType::kF32) return ncclFloat32;
    if constexpr (d == DType::kF16) return ncclFloat16;
    if constexpr (d == DType::kBF16) return ncclBfloat16;
    if constexpr (d == DType::kI64) return ncclInt64;
    if constexpr (d == DType::kI32) return ncclInt32;
    if constexpr (d == DType::kI8) return ncclInt8;
    if constexpr (d == DType::kU8) return ncclUint8;
    fail(ErrorKind::kInternal, cat("no NCCL reduction type for ", to_string(d)));
  });
  return {type, count * static_cast<size_t>(as.lanes)};
}

}  // namespace reshard::detail
