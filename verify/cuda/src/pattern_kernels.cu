// The test pattern on the GPU: fill a rank's local tensor and count the elements that differ from it.
#include "pattern_kernels.hpp"
#include "reshard/detail/pattern_bits.hpp"

namespace reshard::cuda {
namespace {

constexpr int kThreads = 256;

__device__ long long global_index(const PatternBox& b, long long local) {
  long long g = 0;
  for (int d = b.ndim - 1; d >= 0; --d) {
    long long idx = local % b.shape[d];
    local /= b.shape[d];
    g += (idx + b.offset[d]) * b.global_stride[d];
  }
  return g;
}

__device__ unsigned long long load_bits(const void* data, long long i, int es) {
  switch (es) {
    case 8:
      return static_cast<const unsigned long long*>(data)[i];
    case 4:
      return static_cast<const unsigned int*>(data)[i];
    case 2:
      return static_cast<const unsigned short*>(data)[i];
    default:
      return static_cast<const unsigned char*>(data)[i];
  }
}

__global__ void fill_pattern(void* data, PatternBox box, DType dtype, int es) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < box.elements;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    unsigned long long bits = detail::pattern_bits(global_index(box, i), dtype);
    switch (es) {
      case 8:
        static_cast<unsigned long long*>(data)[i] = bits;
        break;
      case 4:
        static_cast<unsigned int*>(data)[i] = static_cast<unsigned int>(bits);
        break;
      case 2:
        static_cast<unsigned short*>(data)[i] = static_cast<unsigned short>(bits);
        break;
      default:
        static_cast<unsigned char*>(data)[i] = static_cast<unsigned char>(bits);
    }
  }
}

__global__ void count_mismatches(const void* data, PatternBox box, DType dtype, int es, unsigned long long* counter) {
  __shared__ unsigned long long block_count;
  if (threadIdx.x == 0) block_count = 0;
  __syncthreads();
  unsigned long long mine = 0;
  const unsigned long long mask = es == 8 ? ~0ull : (1ull << (8 * es)) - 1;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < box.elements;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    unsigned long long want = detail::pattern_bits(global_index(box, i), dtype) & mask;
    mine += load_bits(data, i, es) != want;
  }
  if (mine) atomicAdd(&block_count, mine);
  __syncthreads();
  if (threadIdx.x == 0 && block_count) atomicAdd(counter, block_count);
}

int grid_for(long long elements) {
  long long blocks = (elements + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 1 ? 1 : (blocks > 65536 ? 65536 : blocks));
}

}  // namespace

cudaError_t load_pattern_kernels() {
  cudaFuncAttributes attributes{};
  const cudaError_t e = cudaFuncGetAttributes(&attributes, fill_pattern);
  return e != cudaSuccess ? e : cudaFuncGetAttributes(&attributes, count_mismatches);
}

cudaError_t launch_fill_pattern(void* data, PatternBox box, DType dtype, int es, cudaStream_t stream) {
  if (box.elements == 0) return cudaSuccess;
  fill_pattern<<<grid_for(box.elements), kThreads, 0, stream>>>(data, box, dtype, es);
  return cudaGetLastError();
}

cudaError_t launch_count_mismatches(const void* data, PatternBox box, DType dtype, int es, unsigned long long* counter,
                                    cudaStream_t stream) {
  if (box.elements == 0) return cudaSuccess;
  count_mismatches<<<grid_for(box.elements), kThreads, 0, stream>>>(data, box, dtype, es, counter);
  return cudaGetLastError();
}

}  // namespace reshard::cuda
