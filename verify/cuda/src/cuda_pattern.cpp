#include "reshard/cuda_pattern.hpp"

#include "pattern_kernels.hpp"
#include "reshard/cuda_check.hpp"

namespace reshard {
namespace {

cuda::PatternBox pattern_box(const Box& box, const Dims& global_shape) {
  RESHARD_REQUIRE(box.ndim() <= cuda::kMaxPatternDims, "the GPU test pattern supports up to ", cuda::kMaxPatternDims,
                  " dims, got ", box.ndim());
  cuda::PatternBox p;
  p.ndim = box.ndim();
  Dims strides = row_major_strides(global_shape);
  for (int d = 0; d < box.ndim(); ++d) {
    p.shape[d] = box.shape[d];
    p.offset[d] = box.offset[d];
    p.global_stride[d] = strides[d];
  }
  p.elements = volume(box);
  return p;
}

}  // namespace

CudaPatternChecker::CudaPatternChecker(Device& device) : counter_(device.allocate(sizeof(unsigned long long))) {
  RESHARD_CUDA_CHECK(cuda::load_pattern_kernels());  // on the counter's device (cheap once loaded)
}

void CudaPatternChecker::fill(void* data, const Box& box, const Dims& global_shape, DType dtype, cudaStream_t stream) {
  RESHARD_CUDA_CHECK(
      cuda::launch_fill_pattern(data, pattern_box(box, global_shape), dtype, element_size(dtype), stream));
}

Index CudaPatternChecker::count_mismatches(const void* data, const Box& box, const Dims& global_shape, DType dtype,
                                           cudaStream_t stream) {
  auto* counter = static_cast<unsigned long long*>(counter_->data());
  RESHARD_CUDA_CHECK(cudaMemsetAsync(counter, 0, sizeof(*counter), stream));
  RESHARD_CUDA_CHECK(
      cuda::launch_count_mismatches(data, pattern_box(box, global_shape), dtype, element_size(dtype), counter, stream));
  unsigned long long host = 0;
  RESHARD_CUDA_CHECK(cudaMemcpyAsync(&host, counter, sizeof(host), cudaMemcpyDeviceToHost, stream));
  RESHARD_CUDA_CHECK(cudaStreamSynchronize(stream));
  return static_cast<Index>(host);
}

}  // namespace reshard
