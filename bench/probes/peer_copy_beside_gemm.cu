// Two GPUs: how much NVLink traffic between them slows a GEMM running beside it on each, by how the bytes move — the
// physical floor of issue 25 (a 1 GiB f32 S0 -> S1 redistribution on mesh (2) beside a bf16 8192^3 GEMM loop must
// slow the GEMM by <= 5%). In that redistribution each GPU copies one 256 MiB column block of its shard locally and
// sends the other 256 MiB block to the other GPU; this probe moves the same bytes with the plainest CUDA calls, so no
// library can do better with them than the best mode here. On each GPU a bf16 GEMM loop runs on one stream; on
// another, back to back until the loop ends, both GPUs at once (symmetric: each sends to the other):
//   none              the GEMM alone
//   peer              cudaMemcpyPeerAsync of 256 MiB contiguous to the other GPU, one call (a push: issued on the
//                     sending GPU's stream)
//   peer-chunks:C     the same bytes in C calls back to back
//   peer2d            cudaMemcpy2DAsync (cudaMemcpyDefault, as the nvlink transport issues them) of the strided block:
//                     8192 rows of 32 KiB (8192 f32 columns) out of 64 KiB-pitch rows (a 8192 x 16384 f32 shard),
//                     into 32 KiB-pitch rows on the other GPU (the received half of its 16384 x 8192 S1 shard)
//   local             that strided block copied locally (cudaMemcpy2DAsync) instead, no peer traffic
//   peer+local        peer, plus the local strided copy on a third stream at the same time (one exchange = both done)
//   peer2d+local      peer2d plus the local strided copy: the real redistribution's shape
//   peer-paced:C:S    peer in C pieces, each followed by an S-microsecond sleep kernel (1 block, 1 thread) on the same
//                     stream: transfer time traded for GEMM time
//   peer2d-paced:C:S  the same with the strided block in C pieces of rows
//   BASE:C, BASE:C:S  any of peer, peer2d, local, peer+local, peer2d+local with every copy of the exchange (the peer
//                     copy and the local one) in C pieces (of rows, back to back on its stream), and an S-microsecond
//                     sleep kernel after each piece of the peer copy (of the local copy in `local`); peer:16 is
//                     peer-chunks:16, peer:16:50 is peer-paced:16:50. A single H100 ran a local 256 MiB strided copy
//                     in 16 pieces beside the same GEMM at -3 to +2% (bench/results/2026-11-25-h100x1-local-copy-
//                     beside-gemm), in one piece at +23 to +27%.
// The GEMM operands hold hashed small integers (as `reshard overlap`'s do), not zeros: zero operands draw less power,
// and these GPUs run at their power cap under a GEMM loop.
// Each measurement starts both GPUs' streams together: a 1-thread gate kernel heads every stream until the host has
// enqueued everything (a watchdog thread opens the gate after 300 ms should the host block on a full queue).
// Reports per mode, per pass (every mode twice, the list in order then reversed: drift of the clocks shows as a
// difference between the passes):
//   gemm_ms           GPU 0's GEMM loop alone (median over the repeats; each beside run is preceded by its own alone
//                     run, both GPUs at once)
//   slow0, slow1      the GEMM loop's slowdown beside the traffic on GPU 0 and GPU 1 (median over repeats of beside /
//                     the alone run right before it)
//   GBps_alone/side   the traffic's rate per GPU and direction (decimal GB/s: the 256 MiB sent to the other GPU per
//                     exchange, or for `local` the 256 MiB copied, over the time per exchange; the link carries twice
//                     this in total, both directions), alone (both GPUs' traffic, no GEMM) and beside the GEMM loop
//                     (exchanges that ended while it ran; the slower GPU's figure)
//   xchg_ms_alone/side, xchg_slow   the time per exchange (256 MiB sent + 256 MiB received, plus the local 256 MiB in
//                     the +local modes, pauses included) back to back, alone and beside, and beside / alone - 1: the
//                     "redistribution slows <= 10%" half of issue 25
//   t0, t1            wall clock (Unix seconds) of the row's measurement, to line it up with nvidia-smi samples
// Build: nvcc -O3 -arch=sm_90 -o peer_copy_beside_gemm peer_copy_beside_gemm.cu -lcublas
// Usage: peer_copy_beside_gemm [M=N=K (8192)] [GEMMs per loop (20)] [repeats (5)] [modes,... (the list below)]
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "probe_check.cuh"

__global__ void sleep_us(unsigned us) {
  for (unsigned i = 0; i < us; ++i) __nanosleep(1000);
}

// Heads a stream until *open becomes non-zero.
__global__ void gate(volatile int* open) {
  while (*open == 0) __nanosleep(1000);
}

// Hashed small integers in [-127, 127] (exact in bf16).
__global__ void fill_pattern(__nv_bfloat16* p, long long count, unsigned seed) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count;
       i += (long long)gridDim.x * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = __float2bfloat16(static_cast<float>(static_cast<int>(h % 255u) - 127));
  }
}

struct Mode {
  std::string name;
  bool peer = false;     // send 256 MiB to the other GPU
  bool strided = false;  // the strided block (cudaMemcpy2DAsync), not 256 MiB contiguous
  bool local = false;    // the local strided copy (alone, or on a third stream beside the peer copy)
  int chunks = 1;        // pieces of each copy (the peer copy and the local one)
  unsigned sleep = 0;    // microseconds after each piece of the peer copy (of the local copy in `local`)
};

// "none"; "peer", "peer2d", "local", "peer+local", "peer2d+local", each with an optional ":C" or ":C:S";
// "peer-chunks:C", "peer-paced:C:S", "peer2d-paced:C:S"; exits 2 on anything else.
Mode parse_mode(const std::string& s) {
  Mode m;
  m.name = s;
  auto number = [&](const std::string& text, long long lo, long long hi) {
    char* end = nullptr;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || v < lo || v > hi) {
      std::fprintf(stderr, "peer_copy_beside_gemm: bad mode '%s' (a number out of %lld-%lld)\n", s.c_str(), lo, hi);
      std::exit(2);
    }
    return v;
  };
  const size_t colon = s.find(':');
  const std::string base = s.substr(0, colon);
  const std::string rest = colon == std::string::npos ? "" : s.substr(colon + 1);
  const size_t colon2 = rest.find(':');
  const std::string c_text = rest.substr(0, colon2);
  const std::string s_text = colon2 == std::string::npos ? "" : rest.substr(colon2 + 1);
  auto pieces = [&] {  // ":C" or ":C:S" (C >= 1, S >= 0)
    if (colon != std::string::npos) m.chunks = static_cast<int>(number(c_text, 1, 8192));
    if (colon2 != std::string::npos) m.sleep = static_cast<unsigned>(number(s_text, 0, 100000));
  };
  if (base == "none" && colon == std::string::npos) return m;
  if (base == "local") {
    m.local = m.strided = true;
    pieces();
    return m;
  }
  m.peer = true;
  if (base == "peer" || base == "peer2d" || base == "peer+local" || base == "peer2d+local") {
    m.strided = base.rfind("peer2d", 0) == 0;
    m.local = base.find("+local") != std::string::npos;
    pieces();
    return m;
  }
  if (base == "peer-chunks" && !rest.empty() && colon2 == std::string::npos) {
    pieces();
    return m;
  }
  if ((base == "peer-paced" || base == "peer2d-paced") && colon2 != std::string::npos) {
    m.strided = base == "peer2d-paced";
    pieces();
    return m;
  }
  std::fprintf(stderr,
               "peer_copy_beside_gemm: unknown mode '%s' (none; peer, peer2d, local, peer+local, peer2d+local, "
               "each optionally :C or :C:S; peer-chunks:C, peer-paced:C:S, peer2d-paced:C:S)\n",
               s.c_str());
  std::exit(2);
}

double wall_s() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

int main(int argc, char** argv) {
  auto arg = [&](int i, long long fallback, long long lo, long long hi, const char* what) {
    return probe_arg(argc, argv, i, fallback, lo, hi, what);
  };
  const int n = static_cast<int>(arg(1, 8192, 256, 32768, "M=N=K"));
  const int gemms = static_cast<int>(arg(2, 20, 1, 1000, "GEMMs per loop"));
  const int repeats = static_cast<int>(arg(3, 5, 1, 100, "repeats"));
  std::vector<Mode> modes;
  {
    std::string list = argc > 4 ? argv[4]
                                : "none,peer,peer-chunks:16,peer2d,local,peer+local,peer2d+local,peer-paced:16:50,"
                                  "peer-paced:16:200";
    for (size_t at = 0; at <= list.size();) {
      const size_t comma = std::min(list.find(',', at), list.size());
      if (comma > at) modes.push_back(parse_mode(list.substr(at, comma - at)));
      at = comma + 1;
    }
  }
  int count = 0;
  CHECK(cudaGetDeviceCount(&count));
  if (count < 2) {
    std::fprintf(stderr, "peer_copy_beside_gemm: needs 2 GPUs, found %d\n", count);
    return 2;
  }
  for (int d = 0; d < 2; ++d) {
    int can = 0;
    CHECK(cudaDeviceCanAccessPeer(&can, d, 1 - d));
    if (!can) {
      std::fprintf(stderr, "peer_copy_beside_gemm: GPU %d cannot access GPU %d's memory\n", d, 1 - d);
      return 2;
    }
    CHECK(cudaSetDevice(d));
    CHECK(cudaDeviceEnablePeerAccess(1 - d, 0));
  }
  // The geometry of S0 -> S1 of a 16384 x 16384 f32 tensor on 2 GPUs: each GPU's source shard is 8192 rows of 64 KiB;
  // it keeps one 32 KiB column block of each row and sends the other; its target shard is 16384 rows of 32 KiB (the
  // first 8192 rows its own block, the last 8192 the other GPU's).
  const long long row_bytes = 32768, rows = 8192, block = rows * row_bytes;  // 256 MiB
  struct Gpu {
    char *src = nullptr, *dst = nullptr;
    __nv_bfloat16 *a = nullptr, *b = nullptr, *c = nullptr;
    cublasHandle_t blas{};
    cudaStream_t gs{}, ts{}, ls{};  // GEMM, traffic (peer or local), the local copy beside the peer copy
    cudaEvent_t g0{}, g1{}, c0{}, fork{}, join{};
    std::vector<cudaEvent_t> ends;  // the end of each exchange
    int* open = nullptr;            // the gate's flag, as this device sees it
  } gpu[2];
  int* open_host = nullptr;
  CHECK(cudaHostAlloc(&open_host, sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable));
  *open_host = 1;
  const size_t mat = static_cast<size_t>(n) * n * sizeof(__nv_bfloat16);
  const float one = 1.0f / (static_cast<float>(n) * 127.0f * 127.0f), zero = 0.0f;  // |C| <= 1
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  for (int d = 0; d < 2; ++d) {
    Gpu& g = gpu[d];
    CHECK(cudaSetDevice(d));
    CHECK(cudaMalloc(&g.src, 2 * block));
    CHECK(cudaMalloc(&g.dst, 2 * block));
    CHECK(cudaMemset(g.src, 1 + d, 2 * block));
    CHECK(cudaMemset(g.dst, 0, 2 * block));
    CHECK(cudaMalloc(&g.a, mat));
    CHECK(cudaMalloc(&g.b, mat));
    CHECK(cudaMalloc(&g.c, mat));
    fill_pattern<<<1024, 256>>>(g.a, static_cast<long long>(n) * n, 17u + d);
    CHECK(cudaGetLastError());
    fill_pattern<<<1024, 256>>>(g.b, static_cast<long long>(n) * n, 91u + d);
    CHECK(cudaGetLastError());
    CHECK(cudaMemset(g.c, 0, mat));
    CHECK_BLAS(cublasCreate(&g.blas));
    CHECK(cudaStreamCreateWithFlags(&g.gs, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&g.ts, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&g.ls, cudaStreamNonBlocking));
    CHECK_BLAS(cublasSetStream(g.blas, g.gs));
    for (cudaEvent_t* e : {&g.g0, &g.g1, &g.c0}) CHECK(cudaEventCreate(e));
    for (cudaEvent_t* e : {&g.fork, &g.join}) CHECK(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
    g.ends.resize(1024);
    for (cudaEvent_t& e : g.ends) CHECK(cudaEventCreate(&e));
    CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&g.open), open_host, 0));
    CHECK(cudaDeviceSynchronize());
  }
  auto gemm_loop = [&](int d) {
    Gpu& g = gpu[d];
    CHECK(cudaSetDevice(d));
    for (int i = 0; i < gemms; ++i)
      CHECK_BLAS(cublasGemmEx(g.blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, g.a, CUDA_R_16BF, n, g.b, CUDA_R_16BF, n,
                              &zero, g.c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  };
  // One exchange on GPU d's traffic stream (and its third stream for the +local modes).
  auto exchange = [&](int d, const Mode& m) {
    Gpu& g = gpu[d];
    Gpu& peer = gpu[1 - d];
    CHECK(cudaSetDevice(d));
    if (m.local && m.peer) {  // the local copy on the third stream, joined at the end of the exchange
      CHECK(cudaEventRecord(g.fork, g.ts));
      CHECK(cudaStreamWaitEvent(g.ls, g.fork, 0));
    }
    const long long per = (rows + m.chunks - 1) / m.chunks;  // rows per piece
    if (m.local) {
      const cudaStream_t s = m.peer ? g.ls : g.ts;
      for (long long r = 0; r < rows; r += per) {
        const long long k = std::min(per, rows - r);
        CHECK(cudaMemcpy2DAsync(g.dst + r * row_bytes, row_bytes, g.src + r * 2 * row_bytes, 2 * row_bytes, row_bytes,
                                k, cudaMemcpyDeviceToDevice, s));
        if (m.sleep && !m.peer) {
          sleep_us<<<1, 1, 0, s>>>(m.sleep);
          CHECK(cudaGetLastError());
        }
      }
    }
    if (m.peer) {
      for (long long r = 0; r < rows; r += per) {
        const long long k = std::min(per, rows - r);
        if (m.strided)
          CHECK(cudaMemcpy2DAsync(peer.dst + block + r * row_bytes, row_bytes, g.src + row_bytes + r * 2 * row_bytes,
                                  2 * row_bytes, row_bytes, k, cudaMemcpyDefault, g.ts));
        else
          CHECK(cudaMemcpyPeerAsync(peer.dst + block + r * row_bytes, 1 - d, g.src + r * row_bytes, d, k * row_bytes,
                                    g.ts));
        if (m.sleep) {
          sleep_us<<<1, 1, 0, g.ts>>>(m.sleep);
          CHECK(cudaGetLastError());
        }
      }
    }
    if (m.local && m.peer) {
      CHECK(cudaEventRecord(g.join, g.ls));
      CHECK(cudaStreamWaitEvent(g.ts, g.join, 0));
    }
  };
  auto elapsed = [](cudaEvent_t x, cudaEvent_t y) {
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, x, y));
    return static_cast<double>(ms);
  };
  auto median = [](std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  auto sync_all = [&] {
    for (int d = 0; d < 2; ++d) {
      CHECK(cudaSetDevice(d));
      CHECK(cudaDeviceSynchronize());
    }
  };
  // Runs `enqueue` behind a gate on both GPUs' GEMM and traffic streams, then opens it; waits for both GPUs.
  auto gated = [&](auto&& enqueue) {
    *open_host = 0;
    for (int d = 0; d < 2; ++d) {
      CHECK(cudaSetDevice(d));
      for (cudaStream_t s : {gpu[d].gs, gpu[d].ts}) {
        gate<<<1, 1, 0, s>>>(gpu[d].open);
        CHECK(cudaGetLastError());
      }
    }
    std::atomic<bool> enqueued{false};
    std::thread watchdog([&] {
      for (int i = 0; i < 300 && !enqueued.load(); ++i) usleep(1000);
      *reinterpret_cast<volatile int*>(open_host) = 1;
    });
    enqueue();
    enqueued = true;
    *reinterpret_cast<volatile int*>(open_host) = 1;
    watchdog.join();
    sync_all();
  };
  // Both GEMM loops at once; GPU d's loop time into ms[d].
  auto gemms_alone = [&](double ms[2]) {
    gated([&] {
      for (int d = 0; d < 2; ++d) {
        CHECK(cudaSetDevice(d));
        CHECK(cudaEventRecord(gpu[d].g0, gpu[d].gs));
        gemm_loop(d);
        CHECK(cudaEventRecord(gpu[d].g1, gpu[d].gs));
      }
    });
    for (int d = 0; d < 2; ++d) ms[d] = elapsed(gpu[d].g0, gpu[d].g1);
  };
  for (int i = 0; i < 3; ++i) {  // clocks up, cuBLAS loaded
    double ms[2];
    gemms_alone(ms);
  }
  std::vector<double> alone0;
  for (int r = 0; r < repeats; ++r) {
    double ms[2];
    gemms_alone(ms);
    alone0.push_back(ms[0]);
  }
  const double gemm_ms = median(alone0);
  std::printf(
      "# %s x2, peer access both ways; bf16 GEMM %dx%dx%d x %d per loop: %.3f ms alone on GPU 0 (%.0f TFLOP/s, "
      "both GPUs at once); exchange: %lld MiB to the other GPU (contiguous, or %lld rows of %lld bytes at pitch %lld), "
      "+local: %lld MiB strided locally; %d repeats\n",
      prop.name, n, n, n, gemms, gemm_ms, 2.0 * n * n * static_cast<double>(n) * gemms / (gemm_ms * 1e-3) / 1e12,
      block >> 20, rows, row_bytes, 2 * row_bytes, block >> 20, repeats);
  std::printf("%-18s %9s %7s %7s %10s %9s %13s %12s %9s %15s\n", "mode", "gemm_ms", "slow0", "slow1", "GBps_alone",
              "GBps_side", "xchg_ms_alone", "xchg_ms_side", "xchg_slow", "t0-t1");
  std::fflush(stdout);
  std::vector<Mode> order(modes);
  order.insert(order.end(), modes.rbegin(), modes.rend());
  const int max_exchanges = static_cast<int>(gpu[0].ends.size());
  for (const Mode& m : order) {
    const double t_begin = wall_s();
    // Alone: both GPUs' exchanges back to back (steady state: the time per exchange after the first).
    double xchg_alone = 0;
    if (m.peer || m.local) {
      const int k = std::max(repeats + 1, 6);
      gated([&] {
        for (int i = 0; i < k; ++i)
          for (int d = 0; d < 2; ++d) {
            exchange(d, m);
            CHECK(cudaEventRecord(gpu[d].ends[i], gpu[d].ts));
          }
      });
      for (int d = 0; d < 2; ++d)
        xchg_alone = std::max(xchg_alone, elapsed(gpu[d].ends[0], gpu[d].ends[k - 1]) / (k - 1));
    }
    std::vector<double> ratio[2], alone_ms, xchg_side;
    for (int r = 0; r < repeats; ++r) {
      // The GEMM loops alone right before each measurement beside (clocks drift over a run).
      double now[2];
      gemms_alone(now);
      alone_ms.push_back(now[0]);
      // Enough exchanges to outlast the GEMM loop even if they run twice as slowly beside it.
      int exchanges = 0;
      if (m.peer || m.local) exchanges = std::min(static_cast<int>(2.0 * gemm_ms / xchg_alone) + 2, max_exchanges);
      gated([&] {
        for (int d = 0; d < 2; ++d) {  // the GEMM loops first: queued before any host blocking on a full queue
          CHECK(cudaSetDevice(d));
          CHECK(cudaEventRecord(gpu[d].g0, gpu[d].gs));
          gemm_loop(d);
          CHECK(cudaEventRecord(gpu[d].g1, gpu[d].gs));
          CHECK(cudaEventRecord(gpu[d].c0, gpu[d].ts));
        }
        for (int i = 0; i < exchanges; ++i)
          for (int d = 0; d < 2; ++d) {
            exchange(d, m);
            CHECK(cudaEventRecord(gpu[d].ends[i], gpu[d].ts));
          }
      });
      double worst = 0;  // the slower GPU's time per exchange beside its GEMM loop
      for (int d = 0; d < 2; ++d) {
        ratio[d].push_back(elapsed(gpu[d].g0, gpu[d].g1) / now[d]);
        if (!exchanges) continue;
        const double gemm_end = elapsed(gpu[d].c0, gpu[d].g1);
        int done = 0;
        double last = 0;
        for (int i = 0; i < exchanges; ++i) {
          const double t = elapsed(gpu[d].c0, gpu[d].ends[i]);
          if (t > gemm_end) break;
          done = i + 1;
          last = t;
        }
        if (done > 0) worst = std::max(worst, last / done);
        if (elapsed(gpu[d].c0, gpu[d].ends[exchanges - 1]) < gemm_end)
          std::fprintf(stderr, "%s: GPU %d's exchanges ended before its GEMM loop\n", m.name.c_str(), d);
      }
      if (worst > 0) xchg_side.push_back(worst);
    }
    const double s0 = 100.0 * (median(ratio[0]) - 1), s1 = 100.0 * (median(ratio[1]) - 1);
    const double t_end = wall_s();
    if (!(m.peer || m.local)) {
      std::printf("%-18s %9.3f %6.1f%% %6.1f%% %10s %9s %13s %12s %9s %.1f-%.1f\n", m.name.c_str(), median(alone_ms),
                  s0, s1, "-", "-", "-", "-", "-", t_begin, t_end);
    } else {
      const double side = median(xchg_side);
      auto rate = [&](double ms) { return ms > 0 ? static_cast<double>(block) / (ms * 1e-3) / 1e9 : 0.0; };
      std::printf("%-18s %9.3f %6.1f%% %6.1f%% %10.0f %9.0f %13.3f %12.3f %8.1f%% %.1f-%.1f\n", m.name.c_str(),
                  median(alone_ms), s0, s1, rate(xchg_alone), rate(side), xchg_alone, side,
                  side > 0 ? 100.0 * (side / xchg_alone - 1) : 0.0, t_begin, t_end);
    }
    std::fflush(stdout);
  }
  return 0;
}
