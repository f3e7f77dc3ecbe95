// The host backend: every rank is a thread of one process, buffers are CPU memory, and messages go through
// in-process mailboxes. It runs exactly the executor code the NCCL backend runs; CI and `--backend host` use it.
//
//   reshard::HostWorld world(4);
//   reshard::run_ranks(4, [&](int rank) {
//     reshard::HostCommunicator comm(world, rank);
//     reshard::HostDevice device;
//     reshard::Executor exec(plan, comm, device);
//     exec.run(...);
//   });
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "reshard/backend.hpp"
#include "reshard/host_reduce.hpp"

namespace reshard {

// The most ranks a host world runs: each rank is a thread (and its messages are copies), so larger worlds are refused
// with a message rather than exhausting the process's threads or address space.
inline constexpr int kMaxHostRanks = 1024;

struct HostWorldOptions {
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};  // a receive waiting longer fails with kTimeout
};

// Shared state of the ranks of one host world: mailboxes keyed by (context, source rank, destination rank),
// matched in order, as NCCL matches sends and receives between a pair.
class HostWorld {
 public:
  // kInvalidArgument unless 1 <= size <= kMaxHostRanks.
  explicit HostWorld(int size, HostWorldOptions options = {});
  int size() const { return size_; }

  void post(std::uint64_t context, int src, int dst, const void* data, size_t bytes);
  // Takes the next message from src to dst; kTimeout after the configured time, kBackend when the world was
  // aborted (another rank failed) or the message has the wrong size.
  void take(std::uint64_t context, int src, int dst, void* data, size_t bytes);
  // Wakes every waiting rank with an error naming `reason`.
  void abort(const std::string& reason);

  // One-sided ordering flags (the host PeerLink): post() bumps the count of (context, src, dst, phase); await()
  // blocks until that count reaches `count` (kTimeout after the configured time, kBackend when aborted).
  void post_signal(std::uint64_t context, int src, int dst, int phase);
  void await_signal(std::uint64_t context, int src, int dst, int phase, std::uint64_t count);
  // Makes every await of `dst` return at once (after a timeout: the rank's remaining work runs on garbage).
  void release_signals(int dst);

 private:
  using Key = std::tuple<std::uint64_t, int, int>;
  using SignalKey = std::tuple<std::uint64_t, int, int, int>;
  int size_;
  HostWorldOptions options_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<Key, std::deque<std::vector<std::byte>>> mailboxes_;
  std::map<SignalKey, std::uint64_t> signals_;
  std::vector<char> released_;  // per world rank
  std::string abort_reason_;
};

class HostCommunicator : public Communicator {
 public:
  // The world communicator of `rank`.
  HostCommunicator(HostWorld& world, int rank);

  int rank() const override { return index_; }
  int size() const override { return static_cast<int>(members_.size()); }
  void exchange(std::span<const SendOp> sends, std::span<const RecvOp> recvs, StreamHandle stream) override;
  void all_gather(const void* send, void* recv, size_t bytes_per_rank, StreamHandle stream) override;
  void reduce_scatter(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                      StreamHandle stream) override;
  void all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op, StreamHandle stream) override;
  Communicator& group(const Mesh& mesh, const std::vector<int>& mesh_dims) override;
  void wait(StreamHandle stream, std::chrono::milliseconds timeout) override;
  void all_gather_host(const void* send, void* recv, size_t bytes) override;

  HostWorld& world() const { return world_; }
  std::uint64_t context() const { return context_; }
  int world_rank(int rank) const { return members_.at(rank); }

 private:
  HostCommunicator(HostWorld& world, std::vector<int> members, int index, std::uint64_t context);
  // Everyone's `bytes` into recv (member order).
  void gather_all(const void* send, void* recv, size_t bytes);

  HostWorld& world_;
  std::vector<int> members_;  // world ranks, in group order
  int index_;                 // this rank's position in members_
  std::uint64_t context_;
  std::map<std::string, std::unique_ptr<HostCommunicator>> groups_;  // by group_key(mesh, dims)
};

// Device memory and copies on the CPU.
class HostDevice : public Device {
 public:
  std::unique_ptr<DeviceMemory> allocate(size_t bytes) override;
  std::unique_ptr<DeviceEvent> create_event() override;
  StreamHandle lane(Lane) override { return nullptr; }
  std::unique_ptr<CopyBatch> prepare_copies(const Copies& copies, int element_size) override;
  std::unique_ptr<CopyBatch> prepare_reductions(const std::vector<ReduceRegion>& regions, DType dtype) override;
  void check_buffer(const void* data, size_t bytes, const char* what) const override;
  // Every rank of a host world shares this process's memory: peers' buffers are plain pointers, and the ordering
  // flags live in the world. `comm` must be a HostCommunicator.
  std::unique_ptr<PeerLink> connect_peers(Communicator& comm) override;
};

// Starts a thread running `body`: how run_ranks creates rank threads (std::thread by default; tests pass one that
// fails, as the system does under a thread or address-space limit).
using ThreadStarter = std::function<std::thread(std::function<void()> body)>;

// Runs fn(rank) on one thread per rank and rethrows the first failure (after every thread ended; a timeout quotes the
// timeouts of up to 7 other ranks, so a stall shows every side of its wait). When a rank
// fails, `world` (if given) is aborted so that the others stop waiting for it. No rank starts fn before every
// thread exists: when a thread cannot be created, the ones already started end without running fn and the call
// fails with kBackend naming the rank, the rank count and the system's reason (never std::terminate).
// kInvalidArgument unless 0 <= n <= kMaxHostRanks.
void run_ranks(int n, const std::function<void(int rank)>& fn, HostWorld* world = nullptr);
void run_ranks(int n, const std::function<void(int rank)>& fn, HostWorld* world, const ThreadStarter& start_thread);

}  // namespace reshard
