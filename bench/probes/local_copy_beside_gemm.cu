// One GPU: how much a local copy slows a GEMM running beside it, by how the copy runs (issue 25). The redistribution
// S0 -> S1 on mesh (2) copies each rank's own 256 MiB column block locally while its other block crosses NVLink; this
// probe isolates the local part. A bf16 GEMM loop runs on one stream; on another, back to back until the loop ends:
//   none            the GEMM alone
//   ce              cudaMemcpy2DAsync of the strided block (the copy engines), as fast as they go
//   kernel:B        a copy kernel of B blocks (16-byte accesses, grid-stride)
//   ce-chunks:C     the copy engines in C chunks of rows, back to back
//   ce-paced:C:S    the copy engines in C chunks, each followed by an S-microsecond sleep kernel (1 block)
//   contiguous[-chunks:C]  the block's bytes as one contiguous range (cudaMemcpyAsync), whole or in C chunks
// First it checks which copies need no SM (they complete while a kernel holds every SM).
// Reports per mode: GEMM loop time beside and its slowdown (median over repeats of beside / alone, the GEMM loop
// timed alone right before each), and the copy's rate beside the GEMM (copies that ended while it ran) and alone
// (decimal GB/s, bytes copied = read once and written once). Build: nvcc -O3 -arch=sm_90 -lcublas.
// Usage: local_copy_beside_gemm [M=N=K (8192)] [copy MiB (256)] [GEMMs per loop (20)] [repeats (5)] [modes,...]
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "probe_check.cuh"

__global__ void copy_block(const uint4* src, uint4* dst, long long rows, long long row_vecs, long long src_pitch_vecs,
                           long long dst_pitch_vecs) {
  const long long total = rows * row_vecs;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    const long long r = i / row_vecs, c = i % row_vecs;
    dst[r * dst_pitch_vecs + c] = src[r * src_pitch_vecs + c];
  }
}

__global__ void sleep_us(unsigned us) {
  for (unsigned i = 0; i < us; ++i) __nanosleep(1000);
}

// Holds every SM (one block per SM, all of its shared memory) until *release becomes non-zero.
__global__ void hold_sms(volatile int* release) {
  extern __shared__ char smem[];
  smem[threadIdx.x] = 0;
  while (*release == 0) __nanosleep(1000);
}

struct Mode {
  std::string name;
  int blocks = 0;           // kernel copy
  int chunks = 0;           // paced copy engine
  unsigned sleep = 0;       // microseconds after each chunk
  bool contiguous = false;  // the block's bytes as one contiguous range (cudaMemcpyAsync), not the strided block
};

int main(int argc, char** argv) {
  auto arg = [&](int i, long long fallback, long long lo, long long hi, const char* what) {
    return probe_arg(argc, argv, i, fallback, lo, hi, what);
  };
  const int n = static_cast<int>(arg(1, 8192, 256, 32768, "M=N=K"));
  const long long copy_bytes = arg(2, 256, 16, 16384, "copy MiB") << 20;
  const int gemms = static_cast<int>(arg(3, 20, 1, 1000, "GEMMs per loop"));
  const int repeats = static_cast<int>(arg(4, 5, 1, 100, "repeats"));
  const std::string only = argc > 5 ? std::string(",") + argv[5] + "," : "";  // modes to run (default all)
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  // The strided block: rows of half a row of a tensor twice as wide (S0 -> S1 on 2 ranks keeps half of each row).
  const long long row_bytes = 32768;  // 8192 f32 columns
  const long long rows = copy_bytes / row_bytes;
  void *src = nullptr, *dst = nullptr;
  CHECK(cudaMalloc(&src, rows * row_bytes * 2));
  CHECK(cudaMalloc(&dst, rows * row_bytes));
  CHECK(cudaMemset(src, 1, rows * row_bytes * 2));
  __nv_bfloat16 *a = nullptr, *b = nullptr, *c = nullptr;
  const size_t mat = static_cast<size_t>(n) * n * sizeof(__nv_bfloat16);
  CHECK(cudaMalloc(&a, mat));
  CHECK(cudaMalloc(&b, mat));
  CHECK(cudaMalloc(&c, mat));
  CHECK(cudaMemset(a, 0, mat));
  CHECK(cudaMemset(b, 0, mat));
  cublasHandle_t blas;
  CHECK_BLAS(cublasCreate(&blas));
  cudaStream_t gs, cs;
  CHECK(cudaStreamCreateWithFlags(&gs, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
  CHECK_BLAS(cublasSetStream(blas, gs));
  const float one = 1.0f, zero = 0.0f;
  auto gemm_loop = [&] {
    for (int i = 0; i < gemms; ++i)
      CHECK_BLAS(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, CUDA_R_16BF, n, b, CUDA_R_16BF, n,
                              &zero, c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  };
  auto copy_once = [&](const Mode& m) {
    if (m.blocks > 0) {
      copy_block<<<m.blocks, 256, 0, cs>>>(static_cast<const uint4*>(src), static_cast<uint4*>(dst), rows,
                                           row_bytes / 16, 2 * row_bytes / 16, row_bytes / 16);
      CHECK(cudaGetLastError());
    } else if (m.chunks > 0) {
      const long long per = (rows + m.chunks - 1) / m.chunks;
      for (long long r = 0; r < rows; r += per) {
        const long long k = std::min(per, rows - r);
        if (m.contiguous)
          CHECK(cudaMemcpyAsync(static_cast<char*>(dst) + r * row_bytes, static_cast<char*>(src) + r * row_bytes,
                                k * row_bytes, cudaMemcpyDeviceToDevice, cs));
        else
          CHECK(cudaMemcpy2DAsync(static_cast<char*>(dst) + r * row_bytes, row_bytes,
                                  static_cast<char*>(src) + r * 2 * row_bytes, 2 * row_bytes, row_bytes, k,
                                  cudaMemcpyDeviceToDevice, cs));
        if (m.sleep) sleep_us<<<1, 1, 0, cs>>>(m.sleep);
      }
    } else if (m.contiguous) {
      CHECK(cudaMemcpyAsync(dst, src, rows * row_bytes, cudaMemcpyDeviceToDevice, cs));
    } else {
      CHECK(cudaMemcpy2DAsync(dst, row_bytes, src, 2 * row_bytes, row_bytes, rows, cudaMemcpyDeviceToDevice, cs));
    }
  };
  // Which copies run on the copy engines: a copy that completes while every SM is held by another kernel did not
  // need an SM.
  {
    int* release = nullptr;
    CHECK(cudaHostAlloc(&release, sizeof(int), cudaHostAllocMapped));
    int smem = 0;
    CHECK(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    CHECK(cudaFuncSetAttribute(hold_sms, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    cudaEvent_t done;
    CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    struct Copy {
      const char* what;
      long long rows;  // of the strided block (0: one contiguous copy of the block's bytes)
    } copies[] = {{"2-D, whole block", rows},
                  {"2-D, 1/16 of the block", rows / 16},
                  {"2-D, 1/64", rows / 64},
                  {"contiguous, whole block's bytes", 0}};
    for (const Copy& cp : copies) {
      *release = 0;
      hold_sms<<<sms, 1024, smem, gs>>>(release);
      CHECK(cudaGetLastError());
      usleep(20000);
      if (cp.rows)
        CHECK(cudaMemcpy2DAsync(dst, row_bytes, src, 2 * row_bytes, row_bytes, cp.rows, cudaMemcpyDeviceToDevice, cs));
      else
        CHECK(cudaMemcpyAsync(dst, src, rows * row_bytes, cudaMemcpyDeviceToDevice, cs));
      CHECK(cudaEventRecord(done, cs));
      bool finished = false;
      for (int i = 0; i < 500 && !finished; ++i) {
        finished = cudaEventQuery(done) == cudaSuccess;
        if (!finished) usleep(1000);
      }
      *release = 1;
      CHECK(cudaDeviceSynchronize());
      std::printf("# %-32s %s\n", cp.what,
                  finished ? "ran on the copy engines (finished with every SM held)"
                           : "waited for SMs (did not finish in 500 ms with every SM held)");
    }
  }
  cudaEvent_t g0, g1, c0, c1;
  for (cudaEvent_t* e : {&g0, &g1, &c0, &c1}) CHECK(cudaEventCreate(e));
  std::vector<cudaEvent_t> ends(1024);  // the end of each copy beside the GEMM loop
  for (cudaEvent_t& e : ends) CHECK(cudaEventCreate(&e));
  auto elapsed = [](cudaEvent_t x, cudaEvent_t y) {
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, x, y));
    return static_cast<double>(ms);
  };
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  // Alone: the GEMM loop, then each copy mode.
  for (int i = 0; i < 3; ++i) gemm_loop();  // clocks up
  CHECK(cudaStreamSynchronize(gs));
  std::vector<double> alone;
  for (int r = 0; r < repeats; ++r) {
    CHECK(cudaEventRecord(g0, gs));
    gemm_loop();
    CHECK(cudaEventRecord(g1, gs));
    CHECK(cudaEventSynchronize(g1));
    alone.push_back(elapsed(g0, g1));
  }
  const double gemm_ms = median(alone);
  const double tflops = 2.0 * n * n * static_cast<double>(n) * gemms / (gemm_ms * 1e-3) / 1e12;
  std::printf(
      "# %s, %d SMs; bf16 GEMM %dx%dx%d x %d: %.3f ms alone (%.0f TFLOP/s); copy block %lld MiB (%lld rows "
      "of %lld bytes, source pitch %lld)\n",
      prop.name, sms, n, n, n, gemms, gemm_ms, tflops, copy_bytes >> 20, rows, row_bytes, 2 * row_bytes);
  std::printf("%-16s %12s %10s %14s %14s\n", "mode", "gemm_ms", "slowdown", "copy_GBps_side", "copy_GBps_alone");
  std::vector<Mode> modes{{"none"},
                          {"ce"},
                          {"kernel:" + std::to_string(sms), sms},
                          {"kernel:" + std::to_string(sms / 2), sms / 2},
                          {"kernel:32", 32},
                          {"kernel:16", 16},
                          {"kernel:8", 8},
                          {"kernel:4", 4},
                          {"ce-chunks:2", 0, 2, 0},
                          {"ce-chunks:4", 0, 4, 0},
                          {"ce-chunks:16", 0, 16, 0},
                          {"ce-chunks:64", 0, 64, 0},
                          {"contiguous", 0, 0, 0, true},
                          {"contiguous-chunks:16", 0, 16, 0, true},
                          {"ce-paced:16:50", 0, 16, 50},
                          {"ce-paced:16:150", 0, 16, 150},
                          {"ce-paced:64:20", 0, 64, 20}};
  // Every mode twice, the list in order then reversed: a drift of the clocks shows as a difference between passes.
  std::vector<Mode> order(modes);
  order.insert(order.end(), modes.rbegin(), modes.rend());
  for (const Mode& m : order) {
    if (!only.empty() && only.find("," + m.name + ",") == std::string::npos) continue;
    double copy_alone_ms = 0;
    if (m.name != "none") {
      copy_once(m);
      CHECK(cudaStreamSynchronize(cs));
      std::vector<double> t;
      for (int r = 0; r < repeats; ++r) {
        CHECK(cudaEventRecord(c0, cs));
        copy_once(m);
        CHECK(cudaEventRecord(c1, cs));
        CHECK(cudaEventSynchronize(c1));
        t.push_back(elapsed(c0, c1));
      }
      copy_alone_ms = median(t);
    }
    std::vector<double> beside, rate, ratio;
    for (int r = 0; r < repeats; ++r) {
      // The GEMM loop alone right before each measurement beside (clocks drift over a run).
      CHECK(cudaEventRecord(g0, gs));
      gemm_loop();
      CHECK(cudaEventRecord(g1, gs));
      CHECK(cudaEventSynchronize(g1));
      const double alone_now = elapsed(g0, g1);
      int copies = 0;
      if (m.name != "none") {
        // Enough copies to outlast the GEMM loop even if they run twice as slowly beside it.
        copies = static_cast<int>(2.0 * gemm_ms / copy_alone_ms) + 2;
        copies = std::min(copies, static_cast<int>(ends.size()));
        CHECK(cudaEventRecord(c0, cs));
        for (int i = 0; i < copies; ++i) {
          copy_once(m);
          CHECK(cudaEventRecord(ends[i], cs));
        }
      }
      CHECK(cudaEventRecord(g0, gs));
      gemm_loop();
      CHECK(cudaEventRecord(g1, gs));
      CHECK(cudaDeviceSynchronize());
      beside.push_back(elapsed(g0, g1));
      ratio.push_back(beside.back() / alone_now);
      if (copies) {  // the copies that ended while the GEMM loop ran: their bytes over the time to the last one
        const double gemm_end = elapsed(c0, g1);
        int done = 0;
        double last = 0;
        for (int i = 0; i < copies; ++i) {
          const double t = elapsed(c0, ends[i]);
          if (t > gemm_end) break;
          done = i + 1;
          last = t;
        }
        if (done > 0) rate.push_back(2.0 * copy_bytes * done / (last * 1e-3) / 1e9);
        if (elapsed(c0, ends[copies - 1]) < gemm_end)
          std::fprintf(stderr, "%s: the copies ended first\n", m.name.c_str());
      }
    }
    const double g = median(beside), slowdown = 100.0 * (median(ratio) - 1);
    if (rate.empty()) rate.push_back(0);
    if (m.name == "none") {
      std::printf("%-16s %12.3f %9.1f%% %14s %14s\n", m.name.c_str(), g, slowdown, "-", "-");
    } else {
      std::printf("%-16s %12.3f %9.1f%% %14.0f %14.0f\n", m.name.c_str(), g, slowdown, median(rate),
                  2.0 * copy_bytes / (copy_alone_ms * 1e-3) / 1e9);
    }
  }
  return 0;
}
