// Kernels of the two-GPU link probe (ipc_link.cu): copy kernels that read or write a peer's buffer.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

// Holds a stream until the host (or another process) raises *flag to `want`: both GPUs' work starts together.
__global__ void gate(volatile int* flag, int want) {
  while (*flag < want) {
  }
}

// p[i] = base + (i mod 4093): each GPU's values differ, so a misplaced element shows.
__global__ void fill(float* p, size_t n, float base) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    p[i] = base + static_cast<float>(i % 4093);
}

// dst[i] = src[i] over n int4s, 4 loads in flight per thread.
__global__ void __launch_bounds__(512) copy16(int4* __restrict__ dst, const int4* __restrict__ src, size_t n) {
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    int4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
    dst[i] = a;
    dst[i + stride] = b;
    dst[i + 2 * stride] = c;
    dst[i + 3 * stride] = d;
  }
  for (; i < n; i += stride) dst[i] = src[i];
}

// Adds to *wrong the elements of out[0, n) that differ from what fill(p, n, base) wrote.
__global__ void count_wrong(const float* out, size_t n, float base, unsigned long long* wrong) {
  unsigned long long w = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    w += out[i] != base + static_cast<float>(i % 4093);
  if (w) atomicAdd(wrong, w);
}
