// The host backend's one reduction, used by its collectives (HostCommunicator) and its reduction batches
// (HostDevice::prepare_reductions): dst = reduce(op, srcs) / divisor, elementwise, with the arithmetic of
// reshard/detail/reduce_math.hpp (the CUDA kernel's too). Dtypes and ops as reducible() allows; kInvalidArgument
// naming them otherwise.
#pragma once

#include <cstddef>
#include <span>

#include "reshard/dims.hpp"
#include "reshard/dtype.hpp"

namespace reshard {

// One operand of a strided reduction: its first element and its strides (in elements of the dtype) over `shape`.
struct HostReduceOperand {
  const void* data = nullptr;
  Dims strides;
};

// For every index x of `shape`: dst[x] = reduce(op, srcs[0][x], srcs[1][x], ...) / divisor, combining in the order
// of `srcs`; no sources writes zeros. dst may alias a source element for element.
void host_reduce(void* dst, const Dims& dst_strides, std::span<const HostReduceOperand> srcs, const Dims& shape,
                 DType dtype, ReduceOp op, Index divisor);
// The same over `count` contiguous elements.
void host_reduce(void* dst, std::span<const void* const> srcs, size_t count, DType dtype, ReduceOp op,
                 Index divisor = 1);
// dst = reduce(op, dst, src).
void host_reduce(void* dst, const void* src, size_t count, DType dtype, ReduceOp op);

}  // namespace reshard
