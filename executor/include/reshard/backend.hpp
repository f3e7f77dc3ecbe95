// The interfaces the executor runs plans through: a Communicator (NCCL, or in-process host threads) and a
// Device (memory and batched copies: CUDA kernels, or CPU loops). The executor is the same code above both.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "reshard/dtype.hpp"
#include "reshard/error.hpp"
#include "reshard/mesh.hpp"
#include "reshard/placement.hpp"
#include "reshard/program.hpp"

namespace reshard {

// A stream of work: a cudaStream_t on the CUDA device, ignored (work is synchronous) on the host.
using StreamHandle = void*;

struct SendOp {
  int peer = 0;  // rank in this communicator
  const void* data = nullptr;
  size_t bytes = 0;
};

struct RecvOp {
  int peer = 0;
  void* data = nullptr;
  size_t bytes = 0;
};

// Communication among the ranks of a group. Enqueues work on a stream; nothing here waits for completion except
// wait(). Errors throw reshard::Error (kBackend, kTimeout).
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Every send and receive of one step, concurrently, as one group (NCCL: one ncclGroupStart/End).
  virtual void exchange(std::span<const SendOp> sends, std::span<const RecvOp> recvs, StreamHandle stream) = 0;
  // Gathers `bytes_per_rank` from every rank into recv (rank order).
  virtual void all_gather(const void* send, void* recv, size_t bytes_per_rank, StreamHandle stream) = 0;
  // Reduces size() chunks of `count` elements from every rank; rank i receives the reduction of chunk i.
  virtual void reduce_scatter(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                              StreamHandle stream) = 0;
  virtual void all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                          StreamHandle stream) = 0;

  // The communicator of this rank's group over `mesh_dims` (group order as Mesh::group), created on first use
  // and cached. Collective: every rank of this communicator must ask for the same dims in the same order.
  virtual Communicator& group(const Mesh& mesh, const std::vector<int>& mesh_dims) = 0;

  // Blocks until the work enqueued on `stream` is done, polling for asynchronous errors. After `timeout` the
  // communicator (and its groups) are aborted and kTimeout is thrown: a stuck peer never hangs the caller.
  virtual void wait(StreamHandle stream, std::chrono::milliseconds timeout) = 0;
  // As wait(), but when `timeout` passes, `release` runs before anything is aborted (the executor releases its
  // one-sided waits there, so the stream can drain before the communicator is torn down: tearing down with a stream
  // stuck on a dead peer can block in the driver). The default releases after wait() threw.
  virtual void wait_releasing(StreamHandle stream, std::chrono::milliseconds timeout,
                              const std::function<void()>& release) {
    try {
      wait(stream, timeout);
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::kTimeout && release) release();
      throw;
    }
  }

  // Exchange on the host: every rank's `bytes` into recv (rank order). Blocking and collective; for small descriptors
  // (memory handles). At setup, and on runs that expose changed buffers (ExecutorOptions::buffers_change): the NCCL
  // communicator makes it a shared-memory exchange of a few microseconds when every rank is on one host.
  virtual void all_gather_host(const void* send, void* recv, size_t bytes) = 0;
};

// Identifies the partition of a communicator into groups over `mesh_dims` of `mesh`: communicators cache their groups
// under it. The same on every rank (so cache hits and collective splits agree), and different for different meshes
// of the same size (mesh dim 0 of (4) and of (2,2) are different groups).
inline std::string group_key(const Mesh& mesh, const std::vector<int>& mesh_dims) {
  std::string key = mesh.str() + ":";
  for (int d : mesh_dims) key += std::to_string(d) + ",";
  return key;
}

// The three buffers of one rank.
struct RankBuffers {
  const void* input = nullptr;
  void* output = nullptr;
  void* work = nullptr;
};

// Every peer's buffers as this rank addresses them (PeerLink::tables; index: communicator rank): tensor 0's and its
// workspace in `peers`, and for a batch every tensor's input, output and workspace at [peer * tensors + tensor].
struct PeerTables {
  const RankBuffers* peers = nullptr;
  const void* const* inputs = nullptr;
  void* const* outputs = nullptr;
  void* const* works = nullptr;
  size_t tensors = 1;
};

// Base pointers of the buffers a RankProgram references: this rank's, and for one-sided steps every rank's as this
// rank can address them (`peer`; empty when the program reads no peer).
struct BufferBases {
  const void* input = nullptr;
  void* output = nullptr;
  void* work = nullptr;
  PeerTables peer;
  // A batch's program: every tensor's input and output (index: BufferRef::tensor; entry 0 equals input/output).
  const void* const* inputs = nullptr;
  void* const* outputs = nullptr;
  // Element size of the output buffers when the program converts (RankProgram::output_dtype); 0: as every buffer's.
  int output_element_size = 0;
};

// The address of a buffer reference's element 0 (`element_size` bytes per element).
inline const void* address_of(const BufferBases& b, const BufferRef& ref, int element_size) {
  const void* base = nullptr;
  if (ref.peer >= 0) {
    const size_t at = static_cast<size_t>(ref.peer) * b.peer.tensors + static_cast<size_t>(ref.tensor);
    base = ref.buffer == Buffer::kInput    ? (ref.tensor > 0 ? b.peer.inputs[at] : b.peer.peers[ref.peer].input)
           : ref.buffer == Buffer::kOutput ? (ref.tensor > 0 ? b.peer.outputs[at] : b.peer.peers[ref.peer].output)
                                           : (ref.tensor > 0 ? b.peer.works[at] : b.peer.peers[ref.peer].work);
  } else if (ref.tensor > 0) {
    base = ref.buffer == Buffer::kInput    ? b.inputs[ref.tensor]
           : ref.buffer == Buffer::kOutput ? b.outputs[ref.tensor]
                                           : b.work;
  } else {
    base = ref.buffer == Buffer::kInput ? b.input : ref.buffer == Buffer::kOutput ? b.output : b.work;
  }
  const int es = ref.buffer == Buffer::kOutput && b.output_element_size > 0 ? b.output_element_size : element_size;
  return static_cast<const std::byte*>(base) + ref.offset * es;
}

// The buffers a rank offers its peers for one-sided steps: every tensor's input, output and workspace (index: tensor;
// a single plan has one; a batch's tensors have their parts of one workspace, RankProgram::tensor_work_offsets). Null
// where no peer addresses it.
struct ExposedBuffers {
  std::span<const void* const> inputs;
  std::span<void* const> outputs;
  std::span<void* const> works;
};

// A batch of copies (or reductions) prepared once (descriptors uploaded) and run many times, one kernel launch (or
// one set of copy-engine calls) per run.
class CopyBatch {
 public:
  virtual ~CopyBatch() = default;
  virtual void run(const BufferBases& bases, StreamHandle stream) = 0;
};

// One-sided access among the ranks of a communicator whose devices can address each other's memory (the NVLink
// transport). Made by Device::connect_peers, collectively over the communicator.
class PeerLink {
 public:
  virtual ~PeerLink() = default;
  // Collective over the communicator: publishes this rank's buffers and maps every peer's into this rank's address
  // space. Mappings are kept per allocation for as long as its owner exposes it now and then: exposing buffers of
  // allocations exposed before exchanges offsets only. Returns false on every rank alike, mapping nothing, when some
  // rank's buffer is memory its peers cannot map (CUDA: virtual-memory or stream-ordered pool allocations, which
  // have no IPC handle); the caller then runs another plan.
  virtual bool expose(const ExposedBuffers& mine) = 0;
  // Every rank's buffers as this rank addresses them; valid after an expose() that returned true.
  virtual PeerTables tables() const = 0;
  // kInvalidArgument, saying why, when this rank cannot address `peer`'s memory (another host, no peer access).
  virtual void require(int peer) const = 0;
  // Whether this rank's copy engines may read `peer`'s memory. False where such a copy can depend on the peer GPU's
  // own hardware queues, which the peer's waits may hold: on CUDA, a rank of this same process (its buffers are
  // another context's allocations; measured to deadlock behind the peer's stream waits, always with
  // CUDA_DEVICE_MAX_CONNECTIONS=1 and now and then with the default 8). The executor runs such copies as kernels.
  virtual bool copy_engines_reach(int peer) const = 0;
  // Device-side ordering, enqueued on `stream`: posts `sync.phase` to the ranks in `sync.notify`, then waits until
  // every rank in `sync.await` has posted it. Holds no SMs while waiting where the device can avoid it; a peer that
  // never posts is caught by the executor's wait() timeout, after which release() unblocks the stream.
  virtual void sync(const PeerSync& sync, StreamHandle stream) = 0;
  // Releases every pending wait of this rank (after a timeout): its streams drain; results are then garbage. Returns
  // what was pending, for the timeout's message: each wait that had not passed (phase, peer, the flag's value and the
  // value awaited); empty when nothing is known.
  virtual std::string release() = 0;
  // A fused step (program.hpp's FusedPeerStep: copies of `dtype`'s elements, or reductions over `dtype`; never both,
  // which the executor checks) as one launch per run; its waits give up after `timeout`, which check() then reports.
  virtual std::unique_ptr<CopyBatch> prepare_fused(const FusedPeerStep& op, DType dtype,
                                                   std::chrono::milliseconds timeout) = 0;
  // As above, for a program that converts (RankProgram::output_dtype): writes into an output buffer (this rank's or a
  // peer's) store elements of `output_dtype`. The default refuses a conversion (kInvalidArgument).
  virtual std::unique_ptr<CopyBatch> prepare_fused(const FusedPeerStep& op, DType dtype, DType output_dtype,
                                                   std::chrono::milliseconds timeout);
  // kTimeout when a fused step gave up waiting for a peer since the last check (after the stream drained).
  virtual void check() = 0;
};

// Orders work between streams: record() on one stream, wait() on another (no-ops on the host, where work is
// done when enqueued). Also a timestamp: elapsed_ms() between two recorded events (after the work completed).
class DeviceEvent {
 public:
  virtual ~DeviceEvent() = default;
  virtual void record(StreamHandle stream) = 0;
  virtual void wait(StreamHandle waiter) = 0;
  virtual double elapsed_ms_since(const DeviceEvent& start) const = 0;
};

// Device memory of one rank (RAII: free on destruction).
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  virtual void* data() = 0;
  virtual size_t bytes() const = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual std::unique_ptr<DeviceMemory> allocate(size_t bytes) = 0;
  virtual std::unique_ptr<DeviceEvent> create_event() = 0;
  // The device's side stream for a lane other than kMain (program.hpp), for work that overlaps the main stream.
  virtual StreamHandle lane(Lane lane) = 0;
  // A batch of copies (program.hpp's Copies: on kernels or the copy engines; with fewer SMs when beside
  // communication), prepared once, run many times.
  virtual std::unique_ptr<CopyBatch> prepare_copies(const Copies& copies, int element_size) = 0;
  // A batch of elementwise reductions (program.hpp's ReduceRegion) over `dtype`, prepared once, one launch per run.
  virtual std::unique_ptr<CopyBatch> prepare_reductions(const std::vector<ReduceRegion>& regions, DType dtype) = 0;
  // For a program that converts (RankProgram::output_dtype): copies read elements of `dtype`, and those whose
  // destination is an output buffer store them as `output_dtype` (dtype_convert.hpp's rules); reductions reduce in
  // `dtype`, round to it, and store the result converted where they write an output buffer. Engine copies cannot
  // convert (the lowering puts copies into the output on kernels). The defaults refuse a conversion
  // (kInvalidArgument) and otherwise call the versions above.
  virtual std::unique_ptr<CopyBatch> prepare_copies(const Copies& copies, DType dtype, DType output_dtype);
  virtual std::unique_ptr<CopyBatch> prepare_reductions(const std::vector<ReduceRegion>& regions, DType dtype,
                                                        DType output_dtype);
  // Whether [data, data + bytes) is memory this device can use (kInvalidArgument naming `what` otherwise).
  virtual void check_buffer(const void* data, size_t bytes, const char* what) const = 0;
  // One-sided access to the other ranks of `comm` (collective over comm). kInvalidArgument, naming the ranks, when
  // some of them cannot address each other's memory (another host, no peer access).
  virtual std::unique_ptr<PeerLink> connect_peers(Communicator& comm) = 0;
  // Names the work enqueued until the matching range_pop() for profilers (NVTX ranges on CUDA); no-ops by default.
  virtual void range_push(const char* /*name*/) {}
  virtual void range_pop() {}
};

}  // namespace reshard
