// Copies and reductions of a region between dense row-major local tensors, as strided views (internal to the
// planner's lowering).
#pragma once

#include <utility>
#include <vector>

#include "reshard/program.hpp"

namespace reshard::detail {

// Copy of `region` (global coordinates) from a tensor holding box `from` (at `src`) to one holding box `to` (at
// `dst`). Dims contiguous in both views are merged and extent-1 dims dropped; the innermost dim has stride 1.
CopyRegion box_copy(BufferRef src, const Box& from, BufferRef dst, const Box& to, const Box& region);

// Reduction of `region` from tensors holding boxes `srcs` into one holding box `to`.
ReduceRegion box_reduce(const std::vector<std::pair<BufferRef, Box>>& srcs, BufferRef dst, const Box& to,
                        const Box& region, ReduceOp op, Index divisor);

}  // namespace reshard::detail
