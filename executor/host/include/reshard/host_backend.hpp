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

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
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

// Shared state of the ranks of one host world: each rank's inbox holds the messages sent to it, matched by (context,
// source rank) in order, as NCCL matches sends and receives between a pair. Each inbox has its own lock and
// condition, and a message wakes its destination only when that rank waits for that very (context, source): a
// world of n ranks whose collectives post n^2 messages neither serialises them on one lock nor wakes n threads per
// message, and an inbox holds only the messages not yet taken.
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
  // A gather among `members` (world ranks) of communicator `context`: the member at `index` contributes `bytes` and
  // receives every member's, in member order, through one shared buffer per round (every member waits for the
  // others, as a collective does): O(members) wakeups where messages would take members^2.
  void gather(std::uint64_t context, const std::vector<int>& members, int index, const void* send, void* recv,
              size_t bytes);

  // One-sided ordering flags (the host PeerLink): post() bumps the count of (context, src, dst, phase); await()
  // blocks until that count reaches `count` (kTimeout after the configured time, kBackend when aborted).
  void post_signal(std::uint64_t context, int src, int dst, int phase);
  void await_signal(std::uint64_t context, int src, int dst, int phase, std::uint64_t count);
  // Makes every await of `dst` return at once (after a timeout: the rank's remaining work runs on garbage).
  void release_signals(int dst);

 private:
  using From = std::pair<std::uint64_t, int>;  // (context, source rank)
  struct Inbox {
    std::mutex mutex;
    std::condition_variable ready;  // a message or signal for this rank, or an abort
    // Messages by (context, source, arrival): the first of a (context, source) is the oldest.
    std::map<std::tuple<std::uint64_t, int, std::uint64_t>, std::vector<std::byte>> messages;
    std::uint64_t arrivals = 0;
    std::optional<From> awaited;                                           // what take() waits for
    std::map<std::tuple<std::uint64_t, int, int>, std::uint64_t> signals;  // by (context, source, phase)
    bool released = false;
  };
  // One group's gathers: a round fills `data`, then every member reads it before the next round writes.
  struct Board {
    std::mutex mutex;
    std::condition_variable ready;
    std::vector<std::byte> data;
    std::vector<char> present;  // per member: arrived in this round
    int arrived = 0, readers = 0;
    std::uint64_t round = 0;
  };
  // The abort reason, when the world was aborted (set once).
  std::optional<std::string> aborted() const;
  // The board of a group: its context and first member (the groups of one context are disjoint).
  Board& board(std::uint64_t context, int first_member);

  int size_;
  HostWorldOptions options_;
  std::vector<Inbox> inboxes_;  // per world rank
  std::mutex boards_mutex_;
  std::map<std::pair<std::uint64_t, int>, std::unique_ptr<Board>> boards_;
  mutable std::mutex abort_mutex_;
  std::string abort_reason_;
  std::atomic<bool> aborting_{false};
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
  // Conversions into the output buffers (backend.hpp): element by element, dtype_convert.hpp's rules.
  std::unique_ptr<CopyBatch> prepare_copies(const Copies& copies, DType dtype, DType output_dtype) override;
  std::unique_ptr<CopyBatch> prepare_reductions(const std::vector<ReduceRegion>& regions, DType dtype,
                                                DType output_dtype) override;
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
