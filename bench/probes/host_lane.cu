// Two GPUs, both directions at once: can PCIe through pinned host memory carry part of a large peer transfer beside
// NVLink's copy engines? link_split.cu found nothing on NVLink faster than the copy engines alone (about 389 GB/s per
// direction on 2x H100), so the 1 GiB S0->R of reshard.torch's benchmark cannot go below ~1480 us over NVLink. Each
// GPU's PCIe link is idle meanwhile. A host lane: the sender copies a slice of what it sends to pinned host memory
// (D2H), the receiver copies it from there into its output (H2D), in chunks so the two overlap.
// Modes (each GPU moves B bytes to the other, at the same time):
//   ce             one cudaMemcpyAsync of B bytes from the peer over NVLink (the nvlink transport's copy)
//   d2h / h2d      each GPU copies B bytes to / from its own pinned host buffer (PCIe alone, one direction)
//   d2h+h2d        both at once on each GPU (PCIe both directions)
//   bounce:C       B bytes through the host: D2H on the sender in C-MiB chunks, each chunk's H2D on the receiver after
//                  the sender's event for it
//   ce+bounce:P:C  P percent of B by bounce:C (the tail), the rest by ce, at the same time
//   ce+local+bounce:P:C  the same and a local copy of B bytes (S0->R's shape)
// Per mode: median over 15 timed repeats (3 untimed first) of the time from a common start (a gate kernel holds both
// GPUs' streams until the host has enqueued everything) to the later GPU's end (CUDA events); the rate is B / t per
// direction (decimal GB/s). Every element of the first timed repeat's output is checked against the peer's values.
//   host_lane [MiB=512]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "probe_check.cuh"
#include "probe_kernels.cuh"

namespace {

constexpr int kMaxChunks = 512;

struct Gpu {
  int id = 0, sms = 0;
  float *src = nullptr, *dst = nullptr, *local_dst = nullptr;
  char* host_out = nullptr;  // pinned: what this GPU sends through the host
  char* host_in = nullptr;   // pinned: h2d's source
  cudaStream_t s[4] = {};
  cudaEvent_t start = nullptr, end = nullptr, joined[4] = {}, chunk_done[kMaxChunks] = {};
  unsigned long long* wrong = nullptr;
};

struct Mode {
  std::string name;
  int bounce_pct = 0;  // percent of B through the host
  size_t chunk_mib = 0;
  bool ce = true, local = false, d2h = false, h2d = false;
};

float base_of(int gpu) { return 1000.0f * (gpu + 1); }

void begin(Gpu& g) {
  CHECK(cudaSetDevice(g.id));
  CHECK(cudaEventRecord(g.start, g.s[0]));
  for (int k = 1; k < 4; ++k) CHECK(cudaStreamWaitEvent(g.s[k], g.start));
}

void finish(Gpu& g) {
  CHECK(cudaSetDevice(g.id));
  for (int k = 1; k < 4; ++k) {
    CHECK(cudaEventRecord(g.joined[k], g.s[k]));
    CHECK(cudaStreamWaitEvent(g.s[0], g.joined[k]));
  }
  CHECK(cudaEventRecord(g.end, g.s[0]));
}

// NVLink and local parts of GPU g's receive (peer p): ce pulls [0, ce_bytes) of p.src into g.dst on s[0].
void enqueue_device(const Mode& m, Gpu& g, Gpu& p, size_t bytes, size_t ce_bytes) {
  CHECK(cudaSetDevice(g.id));
  if (m.ce && ce_bytes > 0) CHECK(cudaMemcpyAsync(g.dst, p.src, ce_bytes, cudaMemcpyDeviceToDevice, g.s[0]));
  if (m.local) CHECK(cudaMemcpyAsync(g.local_dst, g.src, bytes, cudaMemcpyDeviceToDevice, g.s[3]));
  if (m.d2h) CHECK(cudaMemcpyAsync(g.host_out, g.src, bytes, cudaMemcpyDeviceToHost, g.s[1]));
  if (m.h2d) CHECK(cudaMemcpyAsync(g.dst, g.host_in, bytes, cudaMemcpyHostToDevice, g.s[2]));
}

// The host lane from g to p: [ce_bytes, bytes) of g.src to p.dst in chunks, D2H on g.s[1], H2D on p.s[2].
void enqueue_bounce(const Mode& m, Gpu& g, Gpu& p, size_t bytes, size_t ce_bytes) {
  const size_t chunk = m.chunk_mib << 20;
  int c = 0;
  for (size_t off = ce_bytes; off < bytes; off += chunk, ++c) {
    const size_t len = std::min(chunk, bytes - off);
    CHECK(cudaSetDevice(g.id));
    CHECK(cudaMemcpyAsync(g.host_out + (off - ce_bytes), reinterpret_cast<const char*>(g.src) + off, len,
                          cudaMemcpyDeviceToHost, g.s[1]));
    CHECK(cudaEventRecord(g.chunk_done[c], g.s[1]));
    CHECK(cudaSetDevice(p.id));
    CHECK(cudaStreamWaitEvent(p.s[2], g.chunk_done[c]));
    CHECK(cudaMemcpyAsync(reinterpret_cast<char*>(p.dst) + off, g.host_out + (off - ce_bytes), len,
                          cudaMemcpyHostToDevice, p.s[2]));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const size_t mib = static_cast<size_t>(probe_arg(argc, argv, 1, 512, 16, 4096, "MiB"));
  const size_t bytes = mib << 20;
  int count = 0;
  CHECK(cudaGetDeviceCount(&count));
  if (count < 2) {
    std::printf("host_lane: needs 2 GPUs, found %d\n", count);
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
    CHECK(cudaMalloc(&g.wrong, sizeof(unsigned long long)));
    CHECK(cudaHostAlloc(&g.host_out, bytes, cudaHostAllocPortable));
    CHECK(cudaHostAlloc(&g.host_in, bytes, cudaHostAllocPortable));
    for (auto& s : g.s) CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaEventCreate(&g.start));
    CHECK(cudaEventCreate(&g.end));
    for (auto& e : g.joined) CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    for (auto& e : g.chunk_done) CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    fill<<<4 * g.sms, 512>>>(g.src, bytes / 4, base_of(i));
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
  }
  // h2d's source holds what the peer would send, so every mode's output has the same expected values.
  for (int i = 0; i < 2; ++i) CHECK(cudaMemcpy(gpu[i].host_in, gpu[1 - i].src, bytes, cudaMemcpyDeviceToHost));
  std::printf("host_lane: %zu MiB per GPU and direction, %d SMs\n", mib, gpu[0].sms);
  std::vector<Mode> modes;
  modes.push_back({"ce"});
  modes.push_back({"d2h", 0, 0, false, false, true, false});
  modes.push_back({"h2d", 0, 0, false, false, false, true});
  modes.push_back({"d2h+h2d", 0, 0, false, false, true, true});
  for (size_t c : {4, 16}) modes.push_back({"bounce:" + std::to_string(c), 100, c, false});
  for (int pct : {6, 9, 12, 15})
    for (size_t c : {2, 8}) modes.push_back({"ce+bounce:" + std::to_string(pct) + ":" + std::to_string(c), pct, c});
  modes.push_back({"ce+local", 0, 0, true, true});
  for (int pct : {6, 9, 12}) modes.push_back({"ce+local+bounce:" + std::to_string(pct) + ":4", pct, 4, true, true});
  std::printf("%-22s %10s %10s %8s\n", "mode", "median_us", "GB/s", "wrong");
  for (const Mode& m : modes) {
    const size_t lane_bytes = (bytes * m.bounce_pct / 100) / 16 * 16;
    const size_t ce_bytes = bytes - lane_bytes;
    if (m.chunk_mib && lane_bytes > kMaxChunks * (m.chunk_mib << 20)) {
      std::printf("%-22s too many chunks\n", m.name.c_str());
      continue;
    }
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
      for (Gpu& g : gpu) begin(g);
      for (int i = 0; i < 2; ++i) enqueue_device(m, gpu[i], gpu[1 - i], bytes, m.ce ? ce_bytes : 0);
      if (lane_bytes > 0)
        for (int i = 0; i < 2; ++i) enqueue_bounce(m, gpu[i], gpu[1 - i], bytes, ce_bytes);
      for (Gpu& g : gpu) finish(g);
      *reinterpret_cast<volatile int*>(gate_flag) = 1;
      for (Gpu& g : gpu) {
        CHECK(cudaSetDevice(g.id));
        CHECK(cudaDeviceSynchronize());
      }
      float worst = 0;
      for (Gpu& g : gpu) {
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, g.start, g.end));
        worst = std::max(worst, ms);
      }
      const bool fills_dst = m.ce || m.h2d || m.bounce_pct == 100;
      if (rep == 3 && fills_dst) {
        for (Gpu& g : gpu) {
          CHECK(cudaSetDevice(g.id));
          CHECK(cudaMemset(g.wrong, 0, sizeof(unsigned long long)));
          count_wrong<<<4 * g.sms, 512>>>(g.dst, bytes / 4, base_of(1 - g.id), g.wrong);
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
    std::printf("%-22s %10.1f %10.1f %8llu\n", m.name.c_str(), med, static_cast<double>(bytes) / med / 1e3,
                wrong_total);
  }
  return 0;
}
