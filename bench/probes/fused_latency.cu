// Two GPUs: where the per-call time of the fused one-sided step goes (issue 14). The fused step is one kernel per
// rank per call (executor/cuda/src/fused_kernel.cu): every block posts "ready" into the peer's flags and waits for the
// peer's, the blocks pull their tiles from the peer's memory, the last block posts "done" and waits for the peer's.
// This probe runs that protocol between GPU 0 and GPU 1 (one process, peer access both ways) in variants and reports
// the time per call back to back, eagerly (one host thread per GPU) and replayed from CUDA graphs (K calls per graph):
//   empty         an empty kernel of one block (the launch floor of the stream)
//   current       the protocol as fused_kernel.cu has it (st.release.sys posts, ld.acquire.sys polls with
//                 __nanosleep(100), __threadfence_system and a block counter before "done")
//   relaxed       polls with relaxed loads and one acquire fence after the wait (posts unchanged)
//   nosleep       current without the __nanosleep in the polls
//   oneblock      current in one block (every tile copied by it)
//   nodone        current without the "done" phase (not a correct protocol: the lower bound of one phase)
//   nofence       no system-scope fence anywhere: relaxed posts and polls, a GPU-scope fence before the block
//                 counter (the pulls are loads whose values are consumed before "done"; the sources were written by
//                 earlier kernels, visible at the owner's L2 that serves the peer's loads)
//   nofence-nodone  both
// Every variant pulls `bytes` (default 16 KiB) from the peer's source into the local destination, in 2 KiB tiles, one
// block per tile (at most 132), and checks the data once at the end. Build: nvcc -O3 -arch=sm_90 -o fused_latency
// fused_latency.cu. Usage: fused_latency [bytes (16384)] [calls per graph (50)] [graph replays (40)] [modes,...]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "probe_check.cuh"

enum Mode { kEmpty, kCurrent, kRelaxed, kNoSleep, kOneBlock, kNoDone, kNoFence, kNoFenceNoDone };

struct Sync {
  unsigned long long* notify_ready;  // in the peer's flags
  unsigned long long* notify_done;
  const unsigned long long* await_ready;  // in this GPU's flags
  const unsigned long long* await_done;
  unsigned long long* state;  // [0] calls completed, [1] blocks finished in this call
  const char* src;            // the peer's source
  char* dst;
  int bytes;
};

__device__ void post(unsigned long long* slot, unsigned long long v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(slot), "l"(v) : "memory");
}
__device__ unsigned long long peek_acquire(const unsigned long long* slot) {
  unsigned long long v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(slot) : "memory");
  return v;
}
__device__ void post_relaxed(unsigned long long* slot, unsigned long long v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(slot), "l"(v) : "memory");
}
__device__ unsigned long long peek_relaxed(const unsigned long long* slot) {
  unsigned long long v;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(slot) : "memory");
  return v;
}

template <Mode M>
__device__ void await(const unsigned long long* slot, unsigned long long epoch) {
  if (M == kNoFence || M == kNoFenceNoDone) {
    while (peek_relaxed(slot) < epoch) __nanosleep(100);
  } else if (M == kRelaxed) {
    while (peek_relaxed(slot) < epoch) __nanosleep(100);
    asm volatile("fence.acq_rel.sys;" ::: "memory");
  } else if (M == kNoSleep) {
    while (peek_acquire(slot) < epoch) {
    }
  } else {
    while (peek_acquire(slot) < epoch) __nanosleep(100);
  }
}

__global__ void empty_kernel() {}

template <Mode M>
__global__ void fused(Sync s) {
  __shared__ unsigned long long epoch;
  if (threadIdx.x == 0) {
    epoch = *reinterpret_cast<volatile unsigned long long*>(&s.state[0]) + 1;
    if (M == kNoFence || M == kNoFenceNoDone)
      post_relaxed(s.notify_ready, epoch);
    else
      post(s.notify_ready, epoch);
    await<M>(s.await_ready, epoch);
  }
  __syncthreads();
  // One 2 KiB tile per block, 16-byte accesses.
  const int tile = 2048;
  for (int off = blockIdx.x * tile; off < s.bytes; off += gridDim.x * tile) {
    const int n = min(tile, s.bytes - off) / 16;
    const uint4* from = reinterpret_cast<const uint4*>(s.src + off);
    uint4* to = reinterpret_cast<uint4*>(s.dst + off);
    for (int i = threadIdx.x; i < n; i += blockDim.x) to[i] = from[i];
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  if (M == kNoFence || M == kNoFenceNoDone)
    __threadfence();
  else
    __threadfence_system();
  const unsigned long long finished = atomicAdd(&s.state[1], 1ull) + 1;
  if (finished != gridDim.x) return;
  if (M == kNoFence) {
    post_relaxed(s.notify_done, epoch);
    await<M>(s.await_done, epoch);
  } else if (M != kNoDone && M != kNoFenceNoDone) {
    post(s.notify_done, epoch);
    await<M>(s.await_done, epoch);
  }
  s.state[1] = 0;
  *reinterpret_cast<volatile unsigned long long*>(&s.state[0]) = epoch;
}

void launch(Mode m, int blocks, const Sync& s, cudaStream_t st) {
  switch (m) {
    case kEmpty:
      empty_kernel<<<1, 32, 0, st>>>();
      break;
    case kCurrent:
      fused<kCurrent><<<blocks, 256, 0, st>>>(s);
      break;
    case kRelaxed:
      fused<kRelaxed><<<blocks, 256, 0, st>>>(s);
      break;
    case kNoSleep:
      fused<kNoSleep><<<blocks, 256, 0, st>>>(s);
      break;
    case kOneBlock:
      fused<kCurrent><<<1, 256, 0, st>>>(s);
      break;
    case kNoDone:
      fused<kNoDone><<<blocks, 256, 0, st>>>(s);
      break;
    case kNoFence:
      fused<kNoFence><<<blocks, 256, 0, st>>>(s);
      break;
    case kNoFenceNoDone:
      fused<kNoFenceNoDone><<<blocks, 256, 0, st>>>(s);
      break;
  }
  CHECK(cudaGetLastError());
}

struct Gpu {
  cudaStream_t stream;
  unsigned long long* flags;  // [0] ready from the peer, [1] done from the peer, [2..3] state
  char *src, *dst;
  Sync sync;
};

int main(int argc, char** argv) {
  const int bytes = static_cast<int>(probe_arg(argc, argv, 1, 16384, 16, 64 << 20, "bytes (a multiple of 16)"));
  const int per_graph = static_cast<int>(probe_arg(argc, argv, 2, 50, 1, 1000, "calls per graph"));
  const int replays = static_cast<int>(probe_arg(argc, argv, 3, 40, 1, 10000, "graph replays"));
  if (bytes % 16 != 0) {
    std::fprintf(stderr, "%s: bytes must be a multiple of 16, got %d\n", argv[0], bytes);
    return 2;
  }
  std::string list = argc > 4 ? argv[4] : "empty,current,relaxed,nosleep,oneblock,nodone,nofence,nofence-nodone";
  const char* names[] = {"empty", "current", "relaxed", "nosleep", "oneblock", "nodone", "nofence", "nofence-nodone"};
  int count = 0;
  CHECK(cudaGetDeviceCount(&count));
  if (count < 2) {
    std::fprintf(stderr, "needs 2 GPUs, found %d\n", count);
    return 2;
  }
  Gpu g[2];
  for (int d = 0; d < 2; ++d) {
    CHECK(cudaSetDevice(d));
    CHECK(cudaDeviceEnablePeerAccess(1 - d, 0));
    CHECK(cudaStreamCreateWithFlags(&g[d].stream, cudaStreamNonBlocking));
    CHECK(cudaMalloc(&g[d].flags, 4 * sizeof(unsigned long long)));
    CHECK(cudaMalloc(&g[d].src, bytes));
    CHECK(cudaMalloc(&g[d].dst, bytes));
    std::vector<char> h(bytes);
    for (int i = 0; i < bytes; ++i) h[i] = static_cast<char>(i * 7 + d * 13);
    CHECK(cudaMemcpy(g[d].src, h.data(), bytes, cudaMemcpyHostToDevice));
  }
  const int blocks = std::max(1, std::min(132, bytes / 2048));
  std::printf("bytes %d, %d blocks, %d calls per graph, %d replays\n", bytes, blocks, per_graph, replays);
  std::printf("%-8s %12s %12s\n", "mode", "eager us", "graph us");
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t end = list.find(',', pos);
    if (end == std::string::npos) end = list.size();
    const std::string name = list.substr(pos, end - pos);
    pos = end + 1;
    int m = -1;
    for (int i = 0; i < 8; ++i)
      if (name == names[i]) m = i;
    if (m < 0) {
      std::fprintf(stderr, "unknown mode %s\n", name.c_str());
      return 2;
    }
    const Mode mode = static_cast<Mode>(m);
    for (int d = 0; d < 2; ++d) {
      CHECK(cudaSetDevice(d));
      CHECK(cudaMemset(g[d].flags, 0, 4 * sizeof(unsigned long long)));
      CHECK(cudaMemset(g[d].dst, 0, bytes));
      CHECK(cudaDeviceSynchronize());
      const int p = 1 - d;
      g[d].sync = Sync{g[p].flags + 0, g[p].flags + 1, g[d].flags + 0, g[d].flags + 1,
                       g[d].flags + 2, g[p].src,       g[d].dst,       bytes};
    }
    // Eager: a host thread per GPU, per_graph * replays calls back to back between two events.
    const int calls = per_graph * replays;
    float eager_ms[2] = {0, 0};
    auto eager = [&](int d) {
      CHECK(cudaSetDevice(d));
      cudaEvent_t a, b;
      CHECK(cudaEventCreate(&a));
      CHECK(cudaEventCreate(&b));
      for (int i = 0; i < 20; ++i) launch(mode, blocks, g[d].sync, g[d].stream);  // warm-up
      CHECK(cudaEventRecord(a, g[d].stream));
      for (int i = 0; i < calls; ++i) launch(mode, blocks, g[d].sync, g[d].stream);
      CHECK(cudaEventRecord(b, g[d].stream));
      CHECK(cudaEventSynchronize(b));
      CHECK(cudaEventElapsedTime(&eager_ms[d], a, b));
      CHECK(cudaEventDestroy(a));
      CHECK(cudaEventDestroy(b));
    };
    std::thread t0(eager, 0), t1(eager, 1);
    t0.join();
    t1.join();
    // Graphs: per_graph calls captured per GPU, replayed `replays` times, both GPUs' launches interleaved.
    cudaGraphExec_t exec[2];
    for (int d = 0; d < 2; ++d) {
      CHECK(cudaSetDevice(d));
      cudaGraph_t graph;
      CHECK(cudaStreamBeginCapture(g[d].stream, cudaStreamCaptureModeThreadLocal));
      for (int i = 0; i < per_graph; ++i) launch(mode, blocks, g[d].sync, g[d].stream);
      CHECK(cudaStreamEndCapture(g[d].stream, &graph));
      CHECK(cudaGraphInstantiate(&exec[d], graph, 0));
      CHECK(cudaGraphDestroy(graph));
      CHECK(cudaGraphLaunch(exec[d], g[d].stream));  // warm-up
    }
    cudaEvent_t a[2], b[2];
    for (int d = 0; d < 2; ++d) {
      CHECK(cudaSetDevice(d));
      CHECK(cudaEventCreate(&a[d]));
      CHECK(cudaEventCreate(&b[d]));
      CHECK(cudaEventRecord(a[d], g[d].stream));
    }
    for (int r = 0; r < replays; ++r)
      for (int d = 0; d < 2; ++d) {
        CHECK(cudaSetDevice(d));
        CHECK(cudaGraphLaunch(exec[d], g[d].stream));
      }
    float graph_ms[2];
    for (int d = 0; d < 2; ++d) {
      CHECK(cudaSetDevice(d));
      CHECK(cudaEventRecord(b[d], g[d].stream));
      CHECK(cudaEventSynchronize(b[d]));
      CHECK(cudaEventElapsedTime(&graph_ms[d], a[d], b[d]));
      CHECK(cudaGraphExecDestroy(exec[d]));
    }
    // The pulled data, once.
    int wrong = 0;
    if (mode != kEmpty) {
      for (int d = 0; d < 2; ++d) {
        std::vector<char> h(bytes);
        CHECK(cudaSetDevice(d));
        CHECK(cudaMemcpy(h.data(), g[d].dst, bytes, cudaMemcpyDeviceToHost));
        for (int i = 0; i < bytes; ++i) wrong += h[i] != static_cast<char>(i * 7 + (1 - d) * 13);
      }
    }
    std::printf("%-8s %12.2f %12.2f   (GPU1 %.2f / %.2f)%s\n", name.c_str(), eager_ms[0] * 1e3 / calls,
                graph_ms[0] * 1e3 / calls, eager_ms[1] * 1e3 / calls, graph_ms[1] * 1e3 / calls,
                wrong ? "  WRONG DATA" : "");
  }
  return 0;
}
