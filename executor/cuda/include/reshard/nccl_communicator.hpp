// The NCCL communicator: wraps the ncclComm_t of the group that spans the mesh (a sharding runtime's TP group) or
// owns one it created; mesh-dim groups are split from it once (ncclCommSplit) and cached.
//
// A stuck peer never hangs the caller. Every NCCL call is watched: a watchdog thread aborts the communicator when a
// call stays blocked longer than the timeout (NCCL blocks a call while it connects to a peer that has not joined),
// and wait() polls the stream and ncclCommGetAsyncError with the same limit. Communicators are blocking by default
// (calls return as soon as the work is enqueued); non-blocking ones (NcclOptions::nonblocking) are polled instead.
#pragma once

#include <nccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "reshard/backend.hpp"
#include "reshard/detail/host_mailbox.hpp"

namespace reshard {

struct NcclOptions {
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};  // a call, a setup or a wait() longer than this aborts
  // Non-blocking communicators return ncclInProgress and are polled; each group then costs a thread handoff (tens of
  // microseconds, as much as a small step), so blocking ones, guarded by the watchdog, are the default.
  bool nonblocking = false;
  // On a timeout or an NCCL error, also abort a communicator the caller passed in (owned = false). Off by default:
  // the error is raised and the caller decides; the mesh-dim groups reshard split from it are always aborted.
  bool abort_unowned = false;
  // all_gather_host through shared memory (detail::HostMailbox) when every rank is on one host, instead of an NCCL
  // all-gather through pinned host memory. Off: always NCCL.
  bool host_mailbox = true;
};

class NcclCommunicator : public Communicator {
 public:
  // Wraps `comm`; destroys it on destruction only when `owned`. The calling thread's current device must be the
  // communicator's.
  NcclCommunicator(ncclComm_t comm, bool owned, NcclOptions options = {});
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  ncclComm_t get() const { return comm_; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void exchange(std::span<const SendOp> sends, std::span<const RecvOp> recvs, StreamHandle stream) override;
  void all_gather(const void* send, void* recv, size_t bytes_per_rank, StreamHandle stream) override;
  void reduce_scatter(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                      StreamHandle stream) override;
  void all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op, StreamHandle stream) override;
  Communicator& group(const Mesh& mesh, const std::vector<int>& mesh_dims) override;
  void wait(StreamHandle stream, std::chrono::milliseconds timeout) override;
  void wait_releasing(StreamHandle stream, std::chrono::milliseconds timeout,
                      const std::function<void()>& release) override;
  void all_gather_host(const void* send, void* recv, size_t bytes) override;

  // Aborts this communicator and its groups (any thread; pending work is abandoned).
  void abort();

 private:
  // Checks an NCCL result; waits out ncclInProgress (non-blocking communicators) up to the timeout.
  void check(ncclResult_t result, const char* call, const char* file, int line);
  void poll_ready(const char* call);
  // Marks the calling thread as inside an NCCL call for the watchdog (RAII).
  class WatchedCall;
  void watchdog();
  // Whether abort() may abort comm_ itself (reshard owns it, or the caller allowed it).
  bool may_abort() const { return owned_ || options_.abort_unowned; }
  // How an error message ends: what happened to the communicator.
  std::string abort_text() const;
  // all_gather_host over NCCL: its device staging and stream, kept for the communicator's life
  // (nccl_communicator.cpp says why).
  void nccl_all_gather_host(const void* send, void* recv, size_t bytes);
  struct HostGatherStaging;
  std::unique_ptr<HostGatherStaging> host_gather_;
  // all_gather_host through shared memory, set up by the first all_gather_host when every rank is on this host.
  void connect_mailbox();
  bool mailbox_tried_ = false;
  std::unique_ptr<detail::HostMailbox> mailbox_;

  ncclComm_t comm_;
  bool owned_;
  std::atomic<bool> aborted_{false};
  std::atomic<bool> abandoned_{false};  // ncclCommAbort still blocked after kAbortGrace (abort())
  std::atomic<bool> watchdog_fired_{false};
  std::atomic<long long> call_started_ns_{0};  // 0: no call in progress
  std::mutex abort_mutex_;
  std::mutex watchdog_mutex_;
  std::condition_variable watchdog_cv_;
  bool stopping_ = false;
  std::thread watchdog_thread_;
  NcclOptions options_;
  int rank_ = 0, size_ = 0;
  std::map<std::string, std::unique_ptr<NcclCommunicator>> groups_;  // by group_key(mesh, dims)
};

// The NCCL library's version as ncclGetVersion gives it (22809 for 2.28.9); kBackend if NCCL fails to say.
int nccl_version();

// One communicator per local GPU (devices 0..n-1, rank i on device i), all in this process: a caller runs rank i
// from its own thread.
std::vector<std::unique_ptr<NcclCommunicator>> make_local_communicators(int n, NcclOptions options = {});

// One rank per process (torchrun / mpirun style). Rank 0 creates the NCCL id and publishes it through
// `rendezvous`: "file:/shared/path" (rank 0 writes it, the others wait for it; use a fresh path per job) or
// "tcp:host:port" (rank 0 listens, the others connect). `device` becomes current for the calling thread.
std::unique_ptr<NcclCommunicator> make_process_communicator(int rank, int size, int device,
                                                            const std::string& rendezvous, NcclOptions options = {});

}  // namespace reshard
