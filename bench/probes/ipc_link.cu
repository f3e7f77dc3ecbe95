// Two GPUs, two processes, both directions at once, each reading or writing the other's memory through CUDA IPC
// mappings (cudaIpcGetMemHandle / cudaIpcOpenMemHandle), as reshard.torch's one process per GPU does. It asks whether
// the IPC mapping itself is slower than peer access within one process, and whether pushing does better than pulling
// through it (docs/transports.md, "Ranks of one process").
// Modes (each process moves B bytes, at the same time as the other):
//   pull-ce / push-ce         one cudaMemcpyAsync from the peer's buffer into this GPU's / from this GPU's into the
//                             peer's
//   pull-ce+local / push-ce+local  the same and a local copy-engine copy of B bytes on another stream (S0->R's shape)
//   pull-k / push-k           a copy kernel (16-byte accesses, 4 in flight per thread, every SM) reading the peer's /
//                             writing the peer's buffer
//   pull-k+local              pull-k and the local copy-engine copy
// Both processes are held by a gate kernel on a flag in shared pinned host memory until both have enqueued; the time
// is each process's start-to-end CUDA events, median of 15 (3 untimed first); the line shows the slower process's.
// Every element of the first timed repeat's output is checked (after both processes finished it).
//   ipc_link [MiB=512]
#include <cuda_runtime.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "probe_check.cuh"
#include "probe_kernels.cuh"

namespace {

struct Mode {
  const char* name;
  bool push, kernel, local;
};

constexpr Mode kModes[] = {{"pull-ce", false, false, false},      {"push-ce", true, false, false},
                           {"pull-ce+local", false, false, true}, {"push-ce+local", true, false, true},
                           {"pull-k", false, true, false},        {"push-k", true, true, false},
                           {"pull-k+local", false, true, true}};

void full_io(int fd, void* p, size_t n, bool write) {
  auto* c = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t k = write ? ::write(fd, c, n) : ::read(fd, c, n);
    if (k <= 0) {
      std::fprintf(stderr, "ipc_link: socket %s failed\n", write ? "write" : "read");
      std::exit(1);
    }
    c += k;
    n -= static_cast<size_t>(k);
  }
}

// Both processes here: sends `mine`, returns the peer's.
template <class T>
T swap_with_peer(int fd, const T& mine) {
  T theirs{};
  full_io(fd, const_cast<T*>(&mine), sizeof(T), true);
  full_io(fd, &theirs, sizeof(T), false);
  return theirs;
}

float base_of(int rank) { return 1000.0f * (rank + 1); }

int run_rank(int rank, int fd, volatile int* gate_host, size_t bytes) {
  CHECK(cudaSetDevice(rank));
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, rank));
  CHECK(cudaHostRegister(const_cast<int*>(gate_host), sizeof(int), cudaHostRegisterMapped | cudaHostRegisterPortable));
  int* gate_dev = nullptr;
  CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&gate_dev), const_cast<int*>(gate_host), 0));
  float *src = nullptr, *dst = nullptr, *local = nullptr;
  unsigned long long* wrong = nullptr;
  CHECK(cudaMalloc(&src, bytes));
  CHECK(cudaMalloc(&dst, bytes));
  CHECK(cudaMalloc(&local, bytes));
  CHECK(cudaMalloc(&wrong, sizeof(unsigned long long)));
  fill<<<4 * sms, 512>>>(src, bytes / 4, base_of(rank));
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  struct Handles {
    cudaIpcMemHandle_t src, dst;
  } mine{}, theirs{};
  CHECK(cudaIpcGetMemHandle(&mine.src, src));
  CHECK(cudaIpcGetMemHandle(&mine.dst, dst));
  theirs = swap_with_peer(fd, mine);
  void *peer_src = nullptr, *peer_dst = nullptr;
  CHECK(cudaIpcOpenMemHandle(&peer_src, theirs.src, cudaIpcMemLazyEnablePeerAccess));
  CHECK(cudaIpcOpenMemHandle(&peer_dst, theirs.dst, cudaIpcMemLazyEnablePeerAccess));
  cudaStream_t s0, s1;
  CHECK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  cudaEvent_t start, end, joined;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&end));
  CHECK(cudaEventCreateWithFlags(&joined, cudaEventDisableTiming));
  int generation = 0;
  if (rank == 0) std::printf("%-16s %10s %10s %8s\n", "mode", "median_us", "GB/s", "wrong");
  for (const Mode& m : kModes) {
    std::vector<double> times;
    unsigned long long wrong_total = 0;
    for (int rep = 0; rep < 18; ++rep) {
      if (rep == 3) {
        CHECK(cudaMemset(dst, 0, bytes));
        CHECK(cudaDeviceSynchronize());
      }
      swap_with_peer(fd, rep);  // both have cleared dst before either writes into the other's
      ++generation;
      gate<<<1, 1, 0, s0>>>(gate_dev, generation);
      CHECK(cudaGetLastError());
      CHECK(cudaEventRecord(start, s0));
      CHECK(cudaStreamWaitEvent(s1, start));
      void* to = m.push ? peer_dst : dst;
      const void* from = m.push ? static_cast<const void*>(src) : peer_src;
      if (m.kernel) {
        copy16<<<2 * sms, 512, 0, s0>>>(static_cast<int4*>(to), static_cast<const int4*>(from), bytes / 16);
        CHECK(cudaGetLastError());
      } else {
        CHECK(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDefault, s0));
      }
      if (m.local) CHECK(cudaMemcpyAsync(local, src, bytes, cudaMemcpyDeviceToDevice, s1));
      CHECK(cudaEventRecord(joined, s1));
      CHECK(cudaStreamWaitEvent(s0, joined));
      CHECK(cudaEventRecord(end, s0));
      // Both have enqueued: rank 0 opens the gate for both.
      swap_with_peer(fd, rep);
      if (rank == 0) __atomic_store_n(const_cast<int*>(gate_host), generation, __ATOMIC_SEQ_CST);
      CHECK(cudaDeviceSynchronize());
      float ms = 0;
      CHECK(cudaEventElapsedTime(&ms, start, end));
      const float peer_ms = swap_with_peer(fd, ms);
      if (rep == 3) {  // both finished (the swap above): dst holds the peer's values either way
        CHECK(cudaMemset(wrong, 0, sizeof(unsigned long long)));
        count_wrong<<<4 * sms, 512>>>(dst, bytes / 4, base_of(1 - rank), wrong);
        CHECK(cudaGetLastError());
        unsigned long long w = 0;
        CHECK(cudaMemcpy(&w, wrong, sizeof(w), cudaMemcpyDeviceToHost));
        wrong_total = w + swap_with_peer(fd, w);
      }
      if (rep >= 3) times.push_back(std::max(ms, peer_ms) * 1e3);
    }
    std::sort(times.begin(), times.end());
    const double med = times[times.size() / 2];
    if (rank == 0)
      std::printf("%-16s %10.1f %10.1f %8llu\n", m.name, med, static_cast<double>(bytes) / med / 1e3, wrong_total);
    std::fflush(stdout);
  }
  CHECK(cudaIpcCloseMemHandle(peer_src));
  CHECK(cudaIpcCloseMemHandle(peer_dst));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t mib = static_cast<size_t>(probe_arg(argc, argv, 1, 512, 16, 4096, "MiB"));
  // Before any CUDA call (a forked child may not use its parent's CUDA state): the socket pair and the gate flag.
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return 1;
  void* shared = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) return 1;
  std::memset(shared, 0, 4096);
  pid_t pids[2];
  for (int r = 0; r < 2; ++r) {
    pids[r] = ::fork();
    if (pids[r] < 0) return 1;
    if (pids[r] == 0) {
      ::close(fds[1 - r]);
      if (r == 0) std::printf("ipc_link: %zu MiB per process and direction, two processes, IPC mappings\n", mib);
      std::fflush(stdout);
      ::_exit(run_rank(r, fds[r], static_cast<volatile int*>(shared), mib << 20));
    }
  }
  int failed = 0;
  for (pid_t p : pids) {
    int status = 0;
    ::waitpid(p, &status, 0);
    failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  return failed ? 1 : 0;
}
