// Block-scaled fp8 on the GPU: block_scale.hpp's rule, bit for bit the host's quantize_blocks.
#pragma once

#include <cuda_runtime.h>

#include "reshard/block_scale.hpp"

namespace reshard {

// Quantizes the dense row-major rows x cols matrix `in` (device memory, `from`) into `out` (rows x cols of `to`) and
// `scale_inv` (scale_grid_shape floats, row-major) on `stream`: one thread block per block of the matrix, which
// reads its block once for the maximum and again (from L2) to quantize. Checks the pair and the block
// (require_block_scaling) and the launch; an empty matrix launches nothing.
void quantize_blocks_on_gpu(const void* in, DType from, Index rows, Index cols, void* out, DType to, float* scale_inv,
                            Index block, cudaStream_t stream);

}  // namespace reshard
