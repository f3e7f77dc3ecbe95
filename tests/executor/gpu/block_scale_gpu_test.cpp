// Block-scaled fp8 on the GPU (block_scale_cuda.hpp): every code and scale equal to the host quantizer's
// (tests/placements/block_scale_test.cpp checks that one against the rule), for every source type, both fp8 types,
// partial edge blocks and a Llama-sized matrix.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "reshard/block_scale_cuda.hpp"
#include "reshard/cuda_check.hpp"
#include "reshard/cuda_device.hpp"
#include "reshard/dtype_convert.hpp"

namespace reshard {
namespace {

// Elements of `from` with values spread over many magnitudes (blocks of their own scale), zeros included, and every
// 13th element 2^-12 of its neighbours' size (the fp8 types' subnormals once quantized).
std::vector<unsigned char> matrix_of(DType from, Index rows, Index cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(rows * cols);
  for (Index i = 0; i < rows; ++i)
    for (Index j = 0; j < cols; ++j) {
      const int exponent = static_cast<int>((i / 64 + j / 96) % 9) - 4 - ((i * cols + j) % 13 == 0 ? 12 : 0);
      v[i * cols + j] = (i / 8 + j / 8) % 9 == 8 ? 0.0f : u(rng) * std::ldexp(1.0f, exponent);
    }
  std::vector<unsigned char> out(v.size() * element_size(from));
  convert_elements(v.data(), DType::kF32, out.data(), from, static_cast<std::int64_t>(v.size()));
  return out;
}

struct DeviceBuffer {
  explicit DeviceBuffer(size_t bytes) { RESHARD_CUDA_CHECK(cudaMalloc(&p, bytes > 0 ? bytes : 1)); }
  ~DeviceBuffer() { cudaFree(p); }
  void* p = nullptr;
};

// One matrix through the kernel and the host quantizer; `offset` elements before the input (an unaligned start takes
// the kernel's general path). Returns the codes and scales compared.
long long compare(DType from, DType to, Index rows, Index cols, Index block, Index offset) {
  const auto in = matrix_of(from, rows, cols, static_cast<unsigned>(rows + 7 * cols));
  const Dims grid = scale_grid_shape(Dims{rows, cols}, block);
  const Index n = rows * cols, g = grid[0] * grid[1];
  const size_t es = static_cast<size_t>(element_size(from));
  std::vector<std::uint8_t> want(n);
  std::vector<float> want_s(g);
  quantize_blocks(in.data(), from, rows, cols, want.data(), to, want_s.data(), block);
  DeviceBuffer din(in.size() + offset * es), dout(n), ds(g * sizeof(float));
  void* src = static_cast<char*>(din.p) + offset * es;
  RESHARD_CUDA_CHECK(cudaMemcpy(src, in.data(), in.size(), cudaMemcpyHostToDevice));
  RESHARD_CUDA_CHECK(cudaMemset(dout.p, 0xAB, n > 0 ? n : 1));
  quantize_blocks_on_gpu(src, from, rows, cols, dout.p, to, static_cast<float*>(ds.p), block, nullptr);
  RESHARD_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<std::uint8_t> got(n);
  std::vector<float> got_s(g);
  RESHARD_CUDA_CHECK(cudaMemcpy(got.data(), dout.p, n, cudaMemcpyDeviceToHost));
  RESHARD_CUDA_CHECK(cudaMemcpy(got_s.data(), ds.p, g * sizeof(float), cudaMemcpyDeviceToHost));
  const std::string what = std::string(to_string(from)) + " -> " + std::string(to_string(to)) + " " +
                           std::to_string(rows) + "x" + std::to_string(cols) + " block " + std::to_string(block) +
                           " offset " + std::to_string(offset);
  EXPECT_EQ(0, std::memcmp(got_s.data(), want_s.data(), g * sizeof(float))) << what << ": scales differ";
  for (Index k = 0; k < n; ++k)
    if (got[k] != want[k]) {
      ADD_FAILURE() << what << ": element " << k << " is " << int{got[k]} << ", not " << int{want[k]};
      break;
    }
  return n + g;
}

// Full 128 x 128 blocks (the vectorised kernel), partial edge blocks, other block sizes and an unaligned start (the
// general kernel), for every source type and both fp8 types, and a Llama-sized matrix.
TEST(GpuBlockScale, KernelEqualsTheHostQuantizerBitForBit) {
  if (cuda_device_count() < 1) GTEST_SKIP() << "needs a GPU";
  RESHARD_CUDA_CHECK(cudaSetDevice(0));
  struct Case {
    Index rows, cols, block, offset;
  };
  const std::vector<Case> cases = {{128, 128, 128, 0}, {256, 384, 128, 0}, {256, 384, 128, 1}, {300, 517, 128, 0},
                                   {1, 1, 128, 0},     {37, 1000, 16, 0},  {257, 129, 64, 0},  {0, 16, 128, 0}};
  long long checked = 0;
  for (DType from : {DType::kBF16, DType::kF16, DType::kF32, DType::kF64})
    for (DType to : {DType::kF8E4M3, DType::kF8E5M2})
      for (const Case& c : cases) checked += compare(from, to, c.rows, c.cols, c.block, c.offset);
  checked += compare(DType::kBF16, DType::kF8E4M3, 4096, 14336, 128, 0);
  std::printf("block-scaled fp8 on the GPU: %lld codes and scales equal to the host's\n", checked);
}

TEST(GpuBlockScale, RefusesWhatItDoesNotQuantize) {
  if (cuda_device_count() < 1) GTEST_SKIP() << "needs a GPU";
  DeviceBuffer a(64), b(64), s(64);
  EXPECT_THROW(
      quantize_blocks_on_gpu(a.p, DType::kI32, 4, 4, b.p, DType::kF8E4M3, static_cast<float*>(s.p), 4, nullptr), Error);
  EXPECT_THROW(quantize_blocks_on_gpu(a.p, DType::kF32, 4, 4, b.p, DType::kBF16, static_cast<float*>(s.p), 4, nullptr),
               Error);
  EXPECT_THROW(
      quantize_blocks_on_gpu(a.p, DType::kF32, 4, 4, b.p, DType::kF8E4M3, static_cast<float*>(s.p), 0, nullptr), Error);
}

}  // namespace
}  // namespace reshard
