// The fused one-sided step: flags and copies in one kernel per rank per call (small redistributions).
#include "copy_tile.cuh"
#include "kernels.hpp"

namespace reshard::cuda {
namespace {

__device__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Flags are strong (system-scope, uncached) but relaxed: no system-scope fence anywhere in the kernel. None is needed,
// because nothing this kernel writes is read by another GPU: "ready" announces data that earlier kernels of the
// poster's stream wrote (visible at the owner's L2, which serves the peers' loads, once those kernels completed), and
// "done" announces that the loads from the peers' memory have returned (their values are consumed by the stores into
// this rank's own buffers before the block counts itself finished). A release post or acquire poll costs a
// system-scope fence, about 1.5 us each on H100 (bench/probes/fused_latency.cu): half the time of a small call.
__device__ void post(unsigned long long* slot, unsigned long long value) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(slot), "l"(value) : "memory");
}

__device__ unsigned long long peek(const unsigned long long* slot) {
  unsigned long long v;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(slot) : "memory");
  return v;
}

// Waits until every slot reaches `epoch`; false (and the error flag set) after the timeout.
__device__ bool await_all(const unsigned long long* const* slots, int count, unsigned long long epoch,
                          const FusedSync& s) {
  const unsigned long long start = now_ns();
  for (int i = 0; i < count; ++i) {
    while (peek(slots[i]) < epoch) {
      if (now_ns() - start > s.timeout_ns) {
        *reinterpret_cast<volatile int*>(s.error) = 1;
        return false;
      }
      __nanosleep(100);
    }
  }
  return true;
}

// At least 4 blocks per SM (64 registers a thread): ranks sharing a GPU (the shared-GPU tests run 4) each launch up
// to one block per SM, and their blocks wait for each other's posts, so all of them must be resident at once.
constexpr int kFusedBlocksPerSm = 4;

__global__ void __launch_bounds__(kThreads, kFusedBlocksPerSm)
    fused_copy(const DeviceCopyRegion* regions, const DeviceCopyTile* tiles, int tile_count, DeviceBases bases,
               FusedSync s) {
  __shared__ unsigned long long epoch;
  __shared__ int go;
  if (threadIdx.x == 0) {
    // state[0] changes only at the end of a call, after every block of it has read it.
    epoch = *reinterpret_cast<volatile unsigned long long*>(&s.state[0]) + 1;
    // Every block posts (the same value): the posts never wait for a block that is not resident yet.
    for (int i = 0; i < s.notify_ready_count; ++i) post(s.notify_ready[i], epoch);
    go = await_all(s.await_ready, s.await_ready_count, epoch, s);
  }
  __syncthreads();
  if (go) copy_tiles(regions, tiles, tile_count, bases);
  __syncthreads();
  if (threadIdx.x != 0) return;
  __threadfence();  // the block's loads and stores are done before it counts (the counter is this GPU's)
  const unsigned long long finished = atomicAdd(&s.state[1], 1ull) + 1;
  if (finished != gridDim.x) return;
  // The last block: every load of this call is done.
  for (int i = 0; i < s.notify_done_count; ++i) post(s.notify_done[i], epoch);
  await_all(s.await_done, s.await_done_count, epoch, s);
  s.state[1] = 0;
  *reinterpret_cast<volatile unsigned long long*>(&s.state[0]) = epoch;
}

}  // namespace

cudaError_t load_fused_kernel() {
  cudaFuncAttributes attributes{};
  return cudaFuncGetAttributes(&attributes, fused_copy);
}

cudaError_t launch_fused(const DeviceCopyRegion* regions, const DeviceCopyTile* tiles, int tile_count, int blocks,
                         DeviceBases bases, const FusedSync& sync, cudaStream_t stream) {
  const int grid = blocks < 1 ? 1 : blocks;
  fused_copy<<<grid, kThreads, 0, stream>>>(regions, tiles, tile_count, bases, sync);
  return cudaGetLastError();
}

}  // namespace reshard::cuda
