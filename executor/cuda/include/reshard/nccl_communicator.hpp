// The NCCL communicator: wraps the ncclComm_t of the group that spans the mesh (a sharding runtime's TP group) or
// owns one it created; mesh-dim groups are split from it once (ncclCommSplit) and cached.
//
// Communicators made by the helpers below are non-blocking: NCCL calls return at once, and reshard polls
// ncclCommGetAsyncError with a timeout, so a peer that never shows up aborts the communicator with a clear error
// instead of hanging. A wrapped blocking communicator works too, but then a stuck peer can block inside NCCL.
#pragma once

#include <nccl.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "reshard/backend.hpp"

namespace reshard {

struct NcclOptions {
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};  // setup, connection and wait() limit
  // Non-blocking communicators let a timeout abort a call waiting for a peer that never comes, at the price of
  // host polling while NCCL sets up; blocking ones may block inside NCCL in that case.
  bool nonblocking = true;
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
  void reduce_scatter(const void* send, void* recv, size_t count, DType dtype, ReduceOp op, StreamHandle stream) override;
  void all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op, StreamHandle stream) override;
  Communicator& group(const Mesh& mesh, const std::vector<int>& mesh_dims) override;
  void wait(StreamHandle stream, std::chrono::milliseconds timeout) override;

  // Aborts this communicator and its groups (any thread; pending work is abandoned).
  void abort();

 private:
  // Checks an NCCL result; waits out ncclInProgress (non-blocking communicators) up to the timeout.
  void check(ncclResult_t result, const char* call, const char* file, int line);
  void poll_ready(const char* call);

  ncclComm_t comm_;
  bool owned_;
  bool aborted_ = false;
  NcclOptions options_;
  int rank_ = 0, size_ = 0;
  std::map<std::vector<int>, std::unique_ptr<NcclCommunicator>> groups_;
};

// One communicator per local GPU (devices 0..n-1, rank i on device i), all in this process: a caller runs rank i
// from its own thread.
std::vector<std::unique_ptr<NcclCommunicator>> make_local_communicators(int n, NcclOptions options = {});

// One rank per process (torchrun / mpirun style). Rank 0 creates the NCCL id and publishes it through
// `rendezvous`: "file:/shared/path" (rank 0 writes it, the others wait for it; use a fresh path per job) or
// "tcp:host:port" (rank 0 listens, the others connect). `device` becomes current for the calling thread.
std::unique_ptr<NcclCommunicator> make_process_communicator(int rank, int size, int device,
                                                             const std::string& rendezvous, NcclOptions options = {});

}  // namespace reshard
