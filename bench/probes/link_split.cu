// Two GPUs, both directions at once: can a large peer transfer beat the copy engines alone, and how close can a
// reduction of the peer's contribution get to the link? The 1 GiB f32 cases of reshard.torch's benchmark are
// link-bound: S0->R on mesh (2) pulls the peer's 512 MiB into each rank's output (plus a local 512 MiB copy), P->S0
// reduces the peer's 512 MiB half into each rank's own half. Modes (each GPU moves B bytes from the other, at the same
// time):
//   ce            one cudaMemcpyAsync of B bytes from the peer (a pull, the nvlink transport's copy)
//   ce-push       the same bytes pushed: issued on the sender's stream
//   ce-k:K        B in K contiguous pieces on K streams at once (more copy engines at work?)
//   pull          a kernel reading the peer (16-byte loads, 4 in flight per thread), all SMs
//   split:P       P percent of B by the copy engines, the rest by the pull kernel, at the same time
//   split-sm:P:S  the same with the kernel on S blocks only
//   ce+local      ce, and a local copy of B bytes on another stream at the same time (S0->R's shape)
//   split+local:P split:P and the local copy
// Reductions (f32, out = mine + peer's over B bytes; S0 of a Partial sum on mesh (2)):
//   red-pull      one kernel reading the peer's half directly (what the nvlink transport runs today)
//   red-ce:C      the copy engines pull the peer's half in C-MiB chunks into a 4-slot ring; a local add kernel per
//                 chunk on a second stream (events order slot reuse)
//   red-split:P:C P percent of B by red-ce:C, the rest by red-pull at the same time
// Per mode: median over 15 timed repeats (3 untimed first) of the time from a common start (both GPUs' streams held
// by a gate kernel until the host has enqueued everything) to the later GPU's end (CUDA events), and the rate per
// direction B / t (decimal GB/s). Each result is checked (every element of the first repeat's output) against the
// values the peer holds: `wrong` counts differing elements.
//   link_split [MiB=512]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "probe_check.cuh"
#include "probe_kernels.cuh"

namespace {

// out[i] = a[i] + b[i] over n float4s, 4 loads of b in flight per thread (b may be the peer's).
__global__ void __launch_bounds__(512)
    add16(float4* __restrict__ out, const float4* __restrict__ a, const float4* __restrict__ b, size_t n) {
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x;
  auto add = [](float4 x, float4 y) { return make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w); };
  for (; i + 3 * stride < n; i += 4 * stride) {
    float4 p = b[i], q = b[i + stride], r = b[i + 2 * stride], s = b[i + 3 * stride];
    out[i] = add(a[i], p);
    out[i + stride] = add(a[i + stride], q);
    out[i + 2 * stride] = add(a[i + 2 * stride], r);
    out[i + 3 * stride] = add(a[i + 3 * stride], s);
  }
  for (; i < n; i += stride) out[i] = add(a[i], b[i]);
}

__global__ void count_wrong(const float* out, size_t n, float base_a, float base_b, bool add,
                            unsigned long long* wrong) {
  unsigned long long w = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    const float v = static_cast<float>(i % 4093);
    const float want = add ? (base_a + v) + (base_b + v) : base_b + v;
    w += out[i] != want;
  }
  if (w) atomicAdd(wrong, w);
}

constexpr int kSlots = 4;

struct Gpu {
  int id = 0, sms = 0;
  float *src = nullptr, *dst = nullptr, *local_dst = nullptr, *ring = nullptr;  // src: what the peer reads
  cudaStream_t s[8] = {};
  cudaEvent_t start = nullptr, end = nullptr, joined[8] = {}, slot_free[kSlots] = {}, slot_full[kSlots] = {};
  unsigned long long* wrong = nullptr;
};

struct Mode {
  std::string name;
  int ce_pct = 100;  // copies: percent by copy engines; reductions: percent by red-ce
  int ce_pieces = 1;
  int blocks = 0;  // 0: every SM x 2
  bool push = false, local = false, reduce = false;
  size_t chunk_mib = 0;  // red-ce chunk
};

float base_of(int gpu) { return 1000.0f * (gpu + 1); }

// Enqueues one repeat of `m` on GPU g (peer p) after its gate; joins every side stream into s[0].
void enqueue(const Mode& m, Gpu& g, Gpu& p, size_t bytes) {
  CHECK(cudaSetDevice(g.id));
  const size_t n16 = bytes / 16;
  const size_t ce_bytes = (bytes * m.ce_pct / 100) / 16 * 16;
  const int blocks = m.blocks ? m.blocks : 2 * g.sms;
  CHECK(cudaEventRecord(g.start, g.s[0]));
  for (int k = 1; k < 8; ++k) CHECK(cudaStreamWaitEvent(g.s[k], g.start));
  int used = 1;
  if (!m.reduce) {
    // Copy-engine part: [0, ce_bytes) in pieces; the kernel part: [ce_bytes, bytes).
    for (int k = 0; k < m.ce_pieces && ce_bytes > 0; ++k) {
      const size_t lo = ce_bytes * k / m.ce_pieces / 16 * 16, hi = ce_bytes * (k + 1) / m.ce_pieces / 16 * 16;
      const int si = 1 + k;
      used = std::max(used, si + 1);
      if (m.push) {  // the peer's stream pushes into this GPU's dst: enqueued on the peer below, symmetrically
        CHECK(cudaMemcpyAsync(reinterpret_cast<char*>(p.dst) + lo, reinterpret_cast<const char*>(g.src) + lo, hi - lo,
                              cudaMemcpyDeviceToDevice, g.s[si]));
      } else {
        CHECK(cudaMemcpyAsync(reinterpret_cast<char*>(g.dst) + lo, reinterpret_cast<const char*>(p.src) + lo, hi - lo,
                              cudaMemcpyDeviceToDevice, g.s[si]));
      }
    }
    if (ce_bytes < bytes) {
      copy16<<<blocks, 512, 0, g.s[0]>>>(reinterpret_cast<int4*>(g.dst) + ce_bytes / 16,
                                         reinterpret_cast<const int4*>(p.src) + ce_bytes / 16, n16 - ce_bytes / 16);
      CHECK(cudaGetLastError());
    }
    if (m.local) {
      CHECK(cudaMemcpyAsync(g.local_dst, g.src, bytes, cudaMemcpyDeviceToDevice, g.s[7]));
      used = 8;
    }
  } else {
    // out (dst) = mine (local_dst holds this GPU's own half: src's values) + peer's src.
    const size_t ce_part = ce_bytes;
    if (ce_part < bytes) {
      add16<<<blocks, 512, 0, g.s[0]>>>(reinterpret_cast<float4*>(g.dst) + ce_part / 16,
                                        reinterpret_cast<const float4*>(g.src) + ce_part / 16,
                                        reinterpret_cast<const float4*>(p.src) + ce_part / 16, n16 - ce_part / 16);
      CHECK(cudaGetLastError());
    }
    const size_t chunk = m.chunk_mib << 20;
    for (size_t off = 0, c = 0; off < ce_part; off += chunk, ++c) {
      const size_t len = std::min(chunk, ce_part - off);
      const int slot = static_cast<int>(c % kSlots);
      float* staged = g.ring + slot * (chunk / 4);
      if (c >= kSlots) CHECK(cudaStreamWaitEvent(g.s[1], g.slot_free[slot]));
      CHECK(cudaMemcpyAsync(staged, reinterpret_cast<const char*>(p.src) + off, len, cudaMemcpyDeviceToDevice, g.s[1]));
      CHECK(cudaEventRecord(g.slot_full[slot], g.s[1]));
      CHECK(cudaStreamWaitEvent(g.s[2], g.slot_full[slot]));
      add16<<<2 * g.sms, 512, 0, g.s[2]>>>(reinterpret_cast<float4*>(g.dst) + off / 16,
                                           reinterpret_cast<const float4*>(g.src) + off / 16,
                                           reinterpret_cast<const float4*>(staged), len / 16);
      CHECK(cudaGetLastError());
      CHECK(cudaEventRecord(g.slot_free[slot], g.s[2]));
    }
    used = 3;
  }
  for (int k = 1; k < used; ++k) {
    CHECK(cudaEventRecord(g.joined[k], g.s[k]));
    CHECK(cudaStreamWaitEvent(g.s[0], g.joined[k]));
  }
  CHECK(cudaEventRecord(g.end, g.s[0]));
}

}  // namespace

int main(int argc, char** argv) {
  const size_t mib = static_cast<size_t>(probe_arg(argc, argv, 1, 512, 16, 4096, "MiB"));
  const size_t bytes = mib << 20;
  int count = 0;
  CHECK(cudaGetDeviceCount(&count));
  if (count < 2) {
    std::printf("link_split: needs 2 GPUs, found %d\n", count);
    return 0;
  }
  Gpu gpu[2];
  int* gate_flag = nullptr;
  CHECK(cudaHostAlloc(&gate_flag, sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable));
  for (int i = 0; i < 2; ++i) {
    Gpu& g = gpu[i];
    g.id = i;
    CHECK(cudaSetDevice(i));
    CHECK(cudaDeviceEnablePeerAccess(1 - i, 0));
    CHECK(cudaDeviceGetAttribute(&g.sms, cudaDevAttrMultiProcessorCount, i));
    CHECK(cudaMalloc(&g.src, bytes));
    CHECK(cudaMalloc(&g.dst, bytes));
    CHECK(cudaMalloc(&g.local_dst, bytes));
    CHECK(cudaMalloc(&g.ring, size_t{kSlots} * (64u << 20)));
    CHECK(cudaMalloc(&g.wrong, sizeof(unsigned long long)));
    for (auto& s : g.s) CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaEventCreate(&g.start));
    CHECK(cudaEventCreate(&g.end));
    for (auto& e : g.joined) CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    for (auto& e : g.slot_free) CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    for (auto& e : g.slot_full) CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    fill<<<4 * g.sms, 512>>>(g.src, bytes / 4, base_of(i));
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
  }
  std::printf("link_split: %zu MiB per GPU and direction, %d SMs\n", mib, gpu[0].sms);
  std::vector<Mode> modes;
  modes.push_back({"ce"});
  modes.push_back({"ce-push", 100, 1, 0, true});
  for (int k : {2, 4}) modes.push_back({"ce-k:" + std::to_string(k), 100, k});
  modes.push_back({"pull", 0});
  for (int pct : {90, 80, 70, 60}) modes.push_back({"split:" + std::to_string(pct), pct});
  for (int b : {16, 32}) modes.push_back({"split-sm:80:" + std::to_string(b), 80, 1, b});
  modes.push_back({"ce+local", 100, 1, 0, false, true});
  for (int pct : {90, 80}) modes.push_back({"split+local:" + std::to_string(pct), pct, 1, 0, false, true});
  modes.push_back({"red-pull", 0, 1, 0, false, false, true});
  for (size_t c : {8, 32}) modes.push_back({"red-ce:" + std::to_string(c), 100, 1, 0, false, false, true, c});
  for (int pct : {80, 60})
    modes.push_back({"red-split:" + std::to_string(pct) + ":32", pct, 1, 0, false, false, true, 32});
  std::printf("%-16s %10s %10s %8s\n", "mode", "median_us", "GB/s", "wrong");
  for (const Mode& m : modes) {
    std::vector<double> times;
    unsigned long long wrong_total = 0;
    for (int rep = 0; rep < 18; ++rep) {
      *reinterpret_cast<volatile int*>(gate_flag) = 0;
      for (Gpu& g : gpu) {
        CHECK(cudaSetDevice(g.id));
        if (rep == 3) {
          CHECK(cudaMemset(g.dst, 0, bytes));
          CHECK(cudaDeviceSynchronize());
        }
        gate<<<1, 1, 0, g.s[0]>>>(gate_flag, 1);
        CHECK(cudaGetLastError());
      }
      for (int i = 0; i < 2; ++i) enqueue(m, gpu[i], gpu[1 - i], bytes);
      *reinterpret_cast<volatile int*>(gate_flag) = 1;
      float worst = 0;
      for (Gpu& g : gpu) {
        CHECK(cudaSetDevice(g.id));
        CHECK(cudaDeviceSynchronize());
      }
      // Both GPUs' events on one timeline: GPU i's start to its end; the gate opened both at once (within the host's
      // store becoming visible: about a microsecond).
      for (Gpu& g : gpu) {
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, g.start, g.end));
        worst = std::max(worst, ms);
      }
      if (rep == 3) {
        for (Gpu& g : gpu) {
          CHECK(cudaSetDevice(g.id));
          CHECK(cudaMemset(g.wrong, 0, sizeof(unsigned long long)));
          count_wrong<<<4 * g.sms, 512>>>(g.dst, bytes / 4, base_of(g.id), base_of(1 - g.id), m.reduce, g.wrong);
          CHECK(cudaGetLastError());
          unsigned long long w = 0;
          CHECK(cudaMemcpy(&w, g.wrong, sizeof(w), cudaMemcpyDeviceToHost));
          wrong_total += w;
        }
      }
      if (rep >= 3) times.push_back(worst * 1e3);
    }
    std::sort(times.begin(), times.end());
    const double med = times[times.size() / 2];
    std::printf("%-16s %10.1f %10.1f %8llu\n", m.name.c_str(), med, static_cast<double>(bytes) / med / 1e3,
                wrong_total);
  }
  return 0;
}
