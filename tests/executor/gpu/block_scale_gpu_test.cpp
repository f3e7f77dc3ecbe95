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

// Elements of `from` with values spread over many magnitudes (blocks of their own scale), zeros included.
std::vector<unsigned char> matrix_of(DType from, Index rows, Index cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(rows * cols);
  for (Index i = 0; i < rows; ++i)
    for (Index j = 0; j < cols; ++j)
      v[i * cols + j] = (i / 8 + j / 8) % 9 == 8 ? 0.0f : u(rng) * std::ldexp(1.0f, static_cast<int>((i / 64 + j / 96) % 9) - 4);
  std::vector<unsigned char> out(v.size() * element_size(from));
  convert_elements(v.data(), DType::kF32, out.data(), from, static_cast<std::int64_t>(v.size()));
  return out;
}

struct DeviceBuffer {
  explicit DeviceBuffer(size_t bytes) { RESHARD_CUDA_CHECK(cudaMalloc(&p, bytes > 0 ? bytes : 1)); }
  ~DeviceBuffer() { cudaFree(p); }
  void* p = nullptr;
};

TEST(GpuBlockScale, KernelEqualsTheHostQuantizerBitForBit) {
  if (cuda_device_count() < 1) GTEST_SKIP() << "needs a GPU";
  RESHARD_CUDA_CHECK(cudaSetDevice(0));
  struct Case {
    Index rows, cols, block;
  };
  const std::vector<Case> cases = {{128, 128, 128}, {300, 517, 128}, {1, 1, 128}, {37, 1000, 16},
                                   {4096, 14336, 128}, {257, 129, 64}, {0, 16, 128}};
  long long checked = 0;
  for (DType from : {DType::kBF16, DType::kF16, DType::kF32, DType::kF64})
    for (DType to : {DType::kF8E4M3, DType::kF8E5M2})
      for (const Case& c : cases) {
        if (c.rows * c.cols > (1 << 22) && !(from == DType::kBF16 && to == DType::kF8E4M3)) continue;
        const auto in = matrix_of(from, c.rows, c.cols, static_cast<unsigned>(c.rows + 7 * c.cols));
        const Dims grid = scale_grid_shape(Dims{c.rows, c.cols}, c.block);
        const Index n = c.rows * c.cols, g = grid[0] * grid[1];
        std::vector<std::uint8_t> want(n);
        std::vector<float> want_s(g);
        quantize_blocks(in.data(), from, c.rows, c.cols, want.data(), to, want_s.data(), c.block);
        DeviceBuffer din(in.size()), dout(n), ds(g * sizeof(float));
        RESHARD_CUDA_CHECK(cudaMemcpy(din.p, in.data(), in.size(), cudaMemcpyHostToDevice));
        RESHARD_CUDA_CHECK(cudaMemset(dout.p, 0xAB, n > 0 ? n : 1));
        quantize_blocks_on_gpu(din.p, from, c.rows, c.cols, dout.p, to, static_cast<float*>(ds.p), c.block, nullptr);
        RESHARD_CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<std::uint8_t> got(n);
        std::vector<float> got_s(g);
        RESHARD_CUDA_CHECK(cudaMemcpy(got.data(), dout.p, n, cudaMemcpyDeviceToHost));
        RESHARD_CUDA_CHECK(cudaMemcpy(got_s.data(), ds.p, g * sizeof(float), cudaMemcpyDeviceToHost));
        const std::string what = std::string(to_string(from)) + " -> " + std::string(to_string(to)) + " " +
                                 std::to_string(c.rows) + "x" + std::to_string(c.cols) + " block " +
                                 std::to_string(c.block);
        ASSERT_EQ(0, std::memcmp(got_s.data(), want_s.data(), g * sizeof(float))) << what << ": scales differ";
        for (Index k = 0; k < n; ++k) ASSERT_EQ(got[k], want[k]) << what << ": element " << k;
        checked += n + g;
      }
  std::printf("block-scaled fp8 on the GPU: %lld codes and scales equal to the host's\n", checked);
}

TEST(GpuBlockScale, RefusesWhatItDoesNotQuantize) {
  if (cuda_device_count() < 1) GTEST_SKIP() << "needs a GPU";
  DeviceBuffer a(64), b(64), s(64);
  EXPECT_THROW(quantize_blocks_on_gpu(a.p, DType::kI32, 4, 4, b.p, DType::kF8E4M3, static_cast<float*>(s.p), 4,
                                      nullptr),
               Error);
  EXPECT_THROW(quantize_blocks_on_gpu(a.p, DType::kF32, 4, 4, b.p, DType::kBF16, static_cast<float*>(s.p), 4, nullptr),
               Error);
  EXPECT_THROW(quantize_blocks_on_gpu(a.p, DType::kF32, 4, 4, b.p, DType::kF8E4M3, static_cast<float*>(s.p), 0,
                                      nullptr),
               Error);
}

}  // namespace
}  // namespace reshard
