// The fused one-sided steps' flag protocol on the GPU, shared by the fused copy and reduction kernels (internal to
// the CUDA backend): every block posts "ready" and waits for its sources before its tiles; the last block to finish
// posts "done", waits for its readers and closes the call.
#pragma once

#include "kernels.hpp"

namespace reshard::cuda {

__device__ inline unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Flags are strong (system-scope, uncached) but relaxed: no system-scope fence anywhere in the kernels. None is
// needed, because nothing a fused kernel writes is read by another GPU: "ready" announces data that earlier kernels of
// the poster's stream wrote (visible at the owner's L2, which serves the peers' loads, once those kernels completed),
// and "done" announces that the loads from the peers' memory have returned (their values are consumed by the stores
// into this rank's own buffers before the block counts itself finished). A release post or acquire poll costs a
// system-scope fence, microseconds each (bench/probes/fused_latency.cu measures them): half the time of a small call.
__device__ inline void post(unsigned long long* slot, unsigned long long value) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(slot), "l"(value) : "memory");
}

__device__ inline unsigned long long peek(const unsigned long long* slot) {
  unsigned long long v;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(slot) : "memory");
  return v;
}

// Waits until every slot reaches `epoch`; false (and the error flag set) after the timeout.
__device__ inline bool await_all(const unsigned long long* const* slots, int count, unsigned long long epoch,
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

// Thread 0 of each block, at the start: the call's epoch (state[0] changes only at the end of a call, after every
// block of it has read it); posts ready (every block the same value, so the posts never wait for a block that is not
// resident yet) and waits for the sources. Returns whether the sources arrived in time.
__device__ inline bool fused_begin(const FusedSync& s, unsigned long long& epoch) {
  epoch = *reinterpret_cast<volatile unsigned long long*>(&s.state[0]) + 1;
  for (int i = 0; i < s.notify_ready_count; ++i) post(s.notify_ready[i], epoch);
  return await_all(s.await_ready, s.await_ready_count, epoch, s);
}

// Thread 0 of each block, after the block's tiles (and a __syncthreads): counts the block finished; the last block of
// the call posts done (every load of the call has returned), waits for the readers and stores the new epoch.
__device__ inline void fused_end(const FusedSync& s, unsigned long long epoch) {
  __threadfence();  // the block's loads and stores are done before it counts (the counter is this GPU's)
  const unsigned long long finished = atomicAdd(&s.state[1], 1ull) + 1;
  if (finished != gridDim.x) return;
  for (int i = 0; i < s.notify_done_count; ++i) post(s.notify_done[i], epoch);
  await_all(s.await_done, s.await_done_count, epoch, s);
  s.state[1] = 0;
  *reinterpret_cast<volatile unsigned long long*>(&s.state[0]) = epoch;
}

// A fused kernel's block: fused_begin on thread 0, body() on every thread when the sources arrived in time, then
// fused_end on thread 0 (each behind a __syncthreads).
template <class Body>
__device__ inline void fused_step(const FusedSync& s, Body body) {
  __shared__ unsigned long long epoch;
  __shared__ int go;
  if (threadIdx.x == 0) go = fused_begin(s, epoch);
  __syncthreads();
  if (go) body();
  __syncthreads();
  if (threadIdx.x == 0) fused_end(s, epoch);
}

}  // namespace reshard::cuda
