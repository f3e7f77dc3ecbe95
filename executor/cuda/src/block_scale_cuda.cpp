// block_scale_cuda.hpp: the checks on the host, then the kernel (block_scale_kernels.cu).
#include "reshard/block_scale_cuda.hpp"

#include "kernels.hpp"
#include "reshard/checked_math.hpp"
#include "reshard/cuda_check.hpp"

namespace reshard {

void quantize_blocks_on_gpu(const void* in, DType from, Index rows, Index cols, void* out, DType to, float* scale_inv,
                            Index block, cudaStream_t stream) {
  require_block_scaling(from, to, block);
  RESHARD_REQUIRE(rows >= 0 && cols >= 0, "quantize_blocks: negative shape ", rows, "x", cols);
  checked_mul(rows, cols, "the quantized matrix's elements");
  const Dims grid = scale_grid_shape(Dims{rows, cols}, block);
  const Index tiles = checked_mul(grid[0], grid[1], "the matrix's blocks");
  if (tiles == 0) return;
  RESHARD_REQUIRE(tiles <= 0x7fffffff, "quantize_blocks: ", tiles, " blocks are more than one launch takes");
  RESHARD_CUDA_CHECK(cuda::launch_quantize_blocks(in, from, rows, cols, out, to, scale_inv, static_cast<int>(block),
                                                  grid[1], static_cast<unsigned>(tiles), stream));
}

}  // namespace reshard
