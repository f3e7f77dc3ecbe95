// One-sided access among the GPUs of one host (the NVLink transport): peers' buffers mapped into this rank's address
// space, and ordering flags in peer-visible memory.
//
// Mapping: ranks of the same process address each other's memory directly (peer access enabled); ranks of other
// processes on the same host share allocations through CUDA IPC handles, published once per allocation and mapped by
// each reader on first use (peer_mappings.hpp). An exposure is one host all-gather over the communicator the runtime
// gave us (Communicator::all_gather_host) of every exposed buffer's (allocation, offset), and a second one only when
// some rank publishes or retires an allocation.
//
// Ordering (the pattern of NCCL's copy-engine collectives): every rank owns a flag array, one 32-bit slot per phase
// and peer; posting puts a value into the peer's slot for this rank without an SM (a stream write-value operation to
// ranks of this process, a 4-byte copy-engine copy to ranks of other processes); waiting is a stream memory operation
// (CU_STREAM_MEM_OP_WAIT_VALUE_32, no SM) on this rank's own slots. Eager posts carry increasing numbers (nothing is
// re-armed); under CUDA-graph capture a post carries 1 and a wait re-arms its slot to 0 in stream order (sync()).
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "cuda_peer_link.hpp"
#include "driver_api.hpp"
#include "fused_batches.hpp"
#include "peer_mappings.hpp"
#include "relaxed_capture.hpp"
#include "reshard/cuda_check.hpp"
#include "reshard/cuda_device.hpp"
#include "reshard/detail/host_mailbox.hpp"
#include "reshard/environment.hpp"
#include "reshard/text.hpp"

namespace reshard::cuda {
namespace {

// What a rank publishes when it connects.
struct Card {
  std::uint64_t host = 0;
  std::int64_t pid = 0;
  std::int32_t device = 0;
  char pci_bus_id[32] = {};
  cudaIpcMemHandle_t flags_handle{};
  std::uint64_t flags = 0;  // address in the owner's process
};

// The fixed part of a rank's exposure record, followed by one BufferName per exposed buffer.
struct ExposureHead {
  std::uint32_t unexportable = 0;  // some buffer has no IPC handle
  std::uint32_t fresh = 0;         // publications in the second round
  std::uint32_t retired = 0;       // retired allocation ids in the second round
  std::uint32_t tensors = 0;
};

// Publications of a rank not exposed by its latest exposure stay published up to this many, and up to this fraction
// of its GPU's memory (peer_mappings.hpp).
constexpr size_t kStalePublications = 8192;
constexpr std::uint64_t kStaleMemoryDivisor = 4;

std::uint64_t stale_bytes_limit(int ordinal) {
  size_t free = 0, total = 0;
  RESHARD_CUDA_CHECK(cudaSetDevice(ordinal));
  RESHARD_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return total / kStaleMemoryDivisor;
}

constexpr int kPhases = 2;
// Stream-operation flags come in two sets, [eager | graph][phase][rank]: eager posts carry increasing numbers and are
// never reset, so an eager flag can hold 1 (after a first run), which a graph's wait for 1 would take for its peer's
// post and run ahead; graphs use flags that only graph replays touch.
constexpr int kFlagSlots = 2 * kPhases;
constexpr int kFusedSlots = 8;  // fused steps per plan (their flags: one epoch per slot, phase and peer)

class CudaPeerLink : public PeerLink {
 public:
  CudaPeerLink(Communicator& comm, Device& device, int ordinal)
      : comm_(comm), device_(device), ordinal_(ordinal), n_(comm.size()), me_(comm.rank()), readers_(n_, me_) {
    RESHARD_CUDA_CHECK(cudaSetDevice(ordinal_));
    RESHARD_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, ordinal_));
    // One allocation: the stream-operation flags ([eager | graph][phase][rank], 32-bit), then the fused steps' epochs
    // ([slot][phase][rank], 64-bit).
    fused_offset_ = (static_cast<size_t>(kFlagSlots) * n_ * sizeof(std::uint32_t) + 15) / 16 * 16;
    const size_t bytes = fused_offset_ + static_cast<size_t>(kFusedSlots) * kPhases * n_ * sizeof(std::uint64_t);
    trace_ = env_trace_ops();
    RESHARD_CUDA_CHECK(cudaMalloc(&flags_, bytes));
    RESHARD_CUDA_CHECK(cudaMemset(flags_, 0, bytes));
    RESHARD_CUDA_CHECK(
        cudaHostAlloc(&seen_, 2 * static_cast<size_t>(kFlagSlots) * n_ * sizeof(std::uint32_t), cudaHostAllocDefault));
    RESHARD_CUDA_CHECK(cudaHostAlloc(&error_, sizeof(int), cudaHostAllocMapped));
    *error_ = 0;
    RESHARD_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&error_device_), error_, 0));
    // The constant 1 (graph posts), then the outbox: [eager | graph][phase][peer], the number of this rank's latest
    // eager post (the graph half stays 0).
    RESHARD_CUDA_CHECK(cudaMalloc(&one_, (1 + static_cast<size_t>(kFlagSlots) * n_) * sizeof(std::uint32_t)));
    RESHARD_CUDA_CHECK(cudaMemset(one_, 0, (1 + static_cast<size_t>(kFlagSlots) * n_) * sizeof(std::uint32_t)));
    outbox_ = one_ + 1;
    posted_.assign(static_cast<size_t>(kFlagSlots) * n_, 0);
    awaited_.assign(static_cast<size_t>(kFlagSlots) * n_, 0);
    expected_.assign(static_cast<size_t>(kFlagSlots) * n_, 0);
    const std::uint32_t one = 1;
    RESHARD_CUDA_CHECK(cudaMemcpy(one_, &one, sizeof(one), cudaMemcpyHostToDevice));
    // The cleared flags must be in memory before any peer can post into them (after the all-gather below): the
    // legacy-stream memset is asynchronous and the runs' non-blocking streams do not wait for it.
    RESHARD_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
    side_ = std::make_unique<CudaStream>(ordinal_);

    Card mine;
    mine.host = detail::machine_id();
    mine.pid = static_cast<std::int64_t>(::getpid());
    mine.device = ordinal_;
    RESHARD_CUDA_CHECK(cudaDeviceGetPCIBusId(mine.pci_bus_id, sizeof(mine.pci_bus_id), ordinal_));
    RESHARD_CUDA_CHECK(cudaIpcGetMemHandle(&mine.flags_handle, flags_));
    mine.flags = reinterpret_cast<std::uint64_t>(flags_);
    cards_.resize(n_);
    comm_.all_gather_host(&mine, cards_.data(), sizeof(Card));

    peer_flags_.assign(n_, nullptr);
    fused_base_.assign(n_, nullptr);
    fused_base_[me_] = reinterpret_cast<std::byte*>(flags_) + fused_offset_;
    reachable_.assign(n_, false);
    peers_.assign(n_, RankBuffers{});
    for (int p = 0; p < n_; ++p) {
      if (p == me_) continue;
      const Card& c = cards_[p];
      if (c.host != mine.host) {
        why_[p] = cat("rank ", p, " runs on another host");
        continue;
      }
      int their = -1;
      if (cudaDeviceGetByPCIBusId(&their, c.pci_bus_id) != cudaSuccess) {
        cudaGetLastError();  // not visible in this process (CUDA_VISIBLE_DEVICES): IPC still maps it
        their = -1;
      }
      if (their >= 0 && their != ordinal_) {  // (ranks sharing this GPU need no peer access)
        int can = 0;
        RESHARD_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, ordinal_, their));
        if (!can) {
          why_[p] = cat("GPU ", ordinal_, " cannot access the memory of rank ", p, "'s GPU ", c.pci_bus_id);
          continue;
        }
        if (c.pid == mine.pid) {
          cudaError_t e = cudaDeviceEnablePeerAccess(their, 0);
          if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) RESHARD_CUDA_CHECK(e);
          cudaGetLastError();  // clear "already enabled"
        }
      }
      peer_flags_[p] = c.pid == mine.pid ? reinterpret_cast<std::uint32_t*>(c.flags)
                                         : static_cast<std::uint32_t*>(open_flags(p, c.flags_handle));
      fused_base_[p] = reinterpret_cast<std::byte*>(peer_flags_[p]) + fused_offset_;
      reachable_[p] = true;
    }
    bool other_process = false;
    for (int p = 0; p < n_; ++p) other_process = other_process || (reachable_[p] && cards_[p].pid != mine.pid);
    owned_ = std::make_unique<OwnedAllocations>(other_process, stale_bytes_limit(ordinal_), kStalePublications);
  }

  ~CudaPeerLink() override {
    cudaSetDevice(ordinal_);
    // This link's kernels may still run: they write the peers' flags through the mappings closed below, and a write
    // lost there leaves a peer waiting for it. So the device finishes first (as the cudaFree below would, too late).
    cudaDeviceSynchronize();
    for (void* address : flags_mapped_) cudaIpcCloseMemHandle(address);
    side_.reset();
    if (one_) cudaFree(one_);
    if (flags_) cudaFree(flags_);
    if (seen_) cudaFreeHost(seen_);
    if (error_) cudaFreeHost(error_);
  }

  std::unique_ptr<CopyBatch> prepare_fused(const FusedPeerStep& op, DType dtype, std::chrono::milliseconds t) override {
    return prepare_fused(op, dtype, dtype, t);
  }
  std::unique_ptr<CopyBatch> prepare_fused(const FusedPeerStep& op, DType dtype, DType output_dtype,
                                           std::chrono::milliseconds timeout) override {
    RESHARD_REQUIRE(op.slot >= 0 && op.slot < kFusedSlots, "a plan fuses at most ", kFusedSlots,
                    " one-sided steps (step ", op.slot, ")");
    const std::vector<int>* lists[4] = {&op.ready.notify, &op.done.notify, &op.ready.await, &op.done.await};
    for (const std::vector<int>* l : lists)
      RESHARD_REQUIRE(static_cast<int>(l->size()) <= kMaxPeerSlots, "a fused step talks to more than ", kMaxPeerSlots,
                      " peers");
    FusedSync s;
    auto fill_notify = [&](const std::vector<int>& peers, int phase, unsigned long long** out, int& count) {
      for (int p : peers) out[count++] = fused_slot(p, op.slot, phase, me_);
    };
    auto fill_await = [&](const std::vector<int>& peers, int phase, const unsigned long long** out, int& count) {
      for (int p : peers) out[count++] = fused_slot(me_, op.slot, phase, p);
    };
    fill_notify(op.ready.notify, 0, s.notify_ready, s.notify_ready_count);
    fill_notify(op.done.notify, 1, s.notify_done, s.notify_done_count);
    fill_await(op.ready.await, 0, s.await_ready, s.await_ready_count);
    fill_await(op.done.await, 1, s.await_done, s.await_done_count);
    s.error = error_device_;
    s.timeout_ns = static_cast<unsigned long long>(timeout.count()) * 1000000ull;
    if (!op.reduce.empty())
      return make_fused_reductions(device_, ordinal_, sm_count_, op.reduce, dtype, output_dtype, s);
    return make_fused_copies(device_, ordinal_, sm_count_, op.regions, dtype, output_dtype, s);
  }

  void check() override {
    if (!*reinterpret_cast<volatile int*>(error_)) return;
    *reinterpret_cast<volatile int*>(error_) = 0;
    fail(ErrorKind::kTimeout, cat("rank ", me_,
                                  ": a peer did not reach the same one-sided step in time; the fused "
                                  "step gave up (its result is garbage)"));
  }

  void require(int peer) const override {
    if (peer == me_ || reachable_[peer]) return;
    auto it = why_.find(peer);
    fail(ErrorKind::kInvalidArgument,
         cat("the plan has rank ", me_, " read rank ", peer, "'s memory one-sided (nvlink), but ",
             it == why_.end() ? std::string("it is not reachable") : it->second,
             "; plan with --transport nccl for these ranks"));
  }

  // Another process's buffers are mapped into this rank's context (IPC): its copy engines read them like its own.
  bool copy_engines_reach(int peer) const override { return peer == me_ || cards_[peer].pid != cards_[me_].pid; }

  bool expose(const ExposedBuffers& mine) override {
    const RelaxedCapture relaxed;
    RESHARD_CUDA_CHECK(cudaSetDevice(ordinal_));
    const auto t0 = std::chrono::steady_clock::now();
    const size_t tensors = mine.inputs.size();
    RESHARD_REQUIRE(mine.outputs.size() == tensors && mine.works.size() == tensors && tensors >= 1,
                    "internal: an exposure of ", tensors, " inputs, ", mine.outputs.size(), " outputs and ",
                    mine.works.size(), " workspaces");
    const size_t slots = 3 * tensors;  // every tensor's input, every tensor's output, every tensor's workspace
    const size_t record = sizeof(ExposureHead) + slots * sizeof(BufferName);
    mine_.assign(record, std::byte{0});
    auto* names = reinterpret_cast<BufferName*>(mine_.data() + sizeof(ExposureHead));
    fresh_.clear();
    retired_.clear();
    owned_->begin();
    bool exportable = true;
    for (size_t i = 0; i < slots; ++i) {
      const void* ptr = i < tensors       ? mine.inputs[i]
                        : i < 2 * tensors ? mine.outputs[i - tensors]
                                          : mine.works[i - 2 * tensors];
      exportable = owned_->name(ptr, names[i], fresh_, retired_) && exportable;
    }
    owned_->end(retired_);
    const ExposureHead head{exportable ? 0u : 1u, static_cast<std::uint32_t>(fresh_.size()),
                            static_cast<std::uint32_t>(retired_.size()), static_cast<std::uint32_t>(tensors)};
    std::memcpy(mine_.data(), &head, sizeof head);
    const auto t1 = std::chrono::steady_clock::now();
    all_.resize(record * n_);
    gather_in_pieces(comm_, mine_.data(), all_.data(), record, piece_);
    size_t extra = 0;
    int unexportable = -1;
    for (int p = 0; p < n_; ++p) {
      ExposureHead h;
      std::memcpy(&h, all_.data() + p * record, sizeof h);
      RESHARD_REQUIRE(h.tensors == tensors, "rank ", p, " exposed ", h.tensors, " tensors, rank ", me_, " ", tensors,
                      ": every rank must run the same plans");
      extra = std::max(extra, h.fresh * sizeof(Publication) + h.retired * sizeof(std::uint64_t));
      if (h.unexportable && unexportable < 0) unexportable = p;
    }
    if (extra > 0) publish(extra);
    const auto t2 = std::chrono::steady_clock::now();
    if (unexportable >= 0) {
      if (trace_) std::fprintf(stderr, "rank %d: expose: rank %d's memory is not exportable\n", me_, unexportable);
      return false;
    }
    tensors_ = tensors;
    peer_inputs_.assign(static_cast<size_t>(n_) * tensors, nullptr);
    peer_outputs_.assign(static_cast<size_t>(n_) * tensors, nullptr);
    peer_works_.assign(static_cast<size_t>(n_) * tensors, nullptr);
    for (int p = 0; p < n_; ++p) {
      if (p != me_ && !reachable_[p]) continue;
      const auto* theirs = reinterpret_cast<const BufferName*>(all_.data() + p * record + sizeof(ExposureHead));
      auto at = [&](size_t i) -> void* {
        if (p == me_)
          return const_cast<void*>(i < tensors       ? mine.inputs[i]
                                   : i < 2 * tensors ? static_cast<const void*>(mine.outputs[i - tensors])
                                                     : mine.works[i - 2 * tensors]);
        return readers_.address(p, theirs[i], cards_[p].pid == cards_[me_].pid);
      };
      for (size_t t = 0; t < tensors; ++t) {
        peer_inputs_[p * tensors + t] = at(t);
        peer_outputs_[p * tensors + t] = at(tensors + t);
        peer_works_[p * tensors + t] = at(2 * tensors + t);
      }
      peers_[p] = RankBuffers{peer_inputs_[p * tensors], peer_outputs_[p * tensors], peer_works_[p * tensors]};
    }
    if (trace_) {
      const auto us = [](auto a, auto b) { return std::chrono::duration<double, std::micro>(b - a).count(); };
      std::fprintf(stderr,
                   "rank %d: expose of %zu tensors: name %.1f us, all-gather %.1f us, map %.1f us (%zu published, "
                   "%zu new, %zu mapped)\n",
                   me_, tensors, us(t0, t1), us(t1, t2), us(t2, std::chrono::steady_clock::now()), owned_->published(),
                   fresh_.size(), readers_.mapped());
    }
    return true;
  }

  PeerTables tables() const override {
    return PeerTables{peers_.data(), peer_inputs_.data(), peer_outputs_.data(), peer_works_.data(), tensors_};
  }

  // Eager runs (as NCCL's CE collectives do): every post to a peer in a phase carries the next number of that
  // (phase, peer) pair, written by a stream operation straight into the peer's flag when the peer is in this process,
  // else into this rank's outbox slot and copied by the copy engine into the peer's flag; the peer waits until its flag
  // reaches the number it expects (>=, wrap-safe). Nothing is re-armed, so no reset can race with a peer's next post.
  // Under CUDA-graph capture the values would be frozen: there a post carries 1, a wait waits for 1 and then re-arms
  // the flag to 0 in stream order, on the graph set of flags (kFlagSlots).
  void sync(const PeerSync& sync, StreamHandle stream) override {
    auto s = static_cast<cudaStream_t>(stream);
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    RESHARD_CUDA_CHECK(cudaStreamIsCapturing(s, &capture));
    const bool graph = capture != cudaStreamCaptureStatusNone;
    const int phase = static_cast<int>(sync.phase) + (graph ? kPhases : 0);
    if (!sync.notify.empty()) {
      ops_.clear();
      auto write = [&](std::uint32_t* address, std::uint32_t value) {
        CUstreamBatchMemOpParams op{};
        op.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
        op.writeValue.address = reinterpret_cast<CUdeviceptr>(address);
        op.writeValue.value = value;
        op.writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
        ops_.push_back(op);
      };
      for (int p : sync.notify) {
        const std::uint32_t value = graph ? 1u : ++posted_[slot(phase, p)];
        if (!graph) write(outbox_ + slot(phase, p), value);
        if (direct(p)) write(peer_flags_[p] + slot(phase, me_), value);
      }
      if (!ops_.empty())
        RESHARD_CU_CHECK(driver_api().stream_batch_mem_op(reinterpret_cast<CUstream>(s),
                                                          static_cast<unsigned int>(ops_.size()), ops_.data(), 0));
      if (trace_) std::fprintf(stderr, "rank %d: posting phase %d (copies)\n", me_, phase);
      for (int p : sync.notify)
        if (!direct(p))
          RESHARD_CUDA_CHECK(cudaMemcpyAsync(peer_flags_[p] + slot(phase, me_), graph ? one_ : outbox_ + slot(phase, p),
                                             sizeof(std::uint32_t), cudaMemcpyDeviceToDevice, s));
    }
    if (trace_) std::fprintf(stderr, "rank %d: %s phase %d\n", me_, sync.notify.empty() ? "no post" : "posted", phase);
    if (sync.await.empty()) return;
    ops_.clear();
    for (int p : sync.await) {
      CUstreamBatchMemOpParams op{};
      op.waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
      op.waitValue.address = reinterpret_cast<CUdeviceptr>(flags_ + slot(phase, p));
      op.waitValue.value = expected_[slot(phase, p)] = graph ? 1u : ++awaited_[slot(phase, p)];
      op.waitValue.flags = graph ? CU_STREAM_WAIT_VALUE_EQ : CU_STREAM_WAIT_VALUE_GEQ;
      ops_.push_back(op);
    }
    for (int p : graph ? sync.await : std::vector<int>{}) {
      CUstreamBatchMemOpParams op{};
      op.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
      op.writeValue.address = reinterpret_cast<CUdeviceptr>(flags_ + slot(phase, p));
      op.writeValue.value = 0;
      op.writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
      ops_.push_back(op);
    }
    RESHARD_CU_CHECK(driver_api().stream_batch_mem_op(reinterpret_cast<CUstream>(s),
                                                      static_cast<unsigned int>(ops_.size()), ops_.data(), 0));
  }

  std::string release() override {
    cudaSetDevice(ordinal_);
    // Bounded throughout: a side stream that CUDA queued behind a stuck wait (streams share hardware queues) must not
    // hang the error path; the caller reports the timeout either way.
    cudaStream_t side = side_->get();
    auto drain = [&] {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      while (cudaStreamQuery(side) == cudaErrorNotReady && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      return cudaStreamQuery(side) == cudaSuccess;
    };
    // What was pending: this rank's flags and outbox as the device holds them now.
    const size_t slots = expected_.size();
    cudaMemcpyAsync(seen_, flags_, slots * sizeof(std::uint32_t), cudaMemcpyDeviceToHost, side);
    cudaMemcpyAsync(seen_ + slots, outbox_, slots * sizeof(std::uint32_t), cudaMemcpyDeviceToHost, side);
    const bool read = drain();
    std::string pending;
    for (int phase = 0; phase < kFlagSlots; ++phase) {
      for (int p = 0; p < n_; ++p) {
        const size_t k = slot(phase, p);
        if (expected_[k] == 0 && posted_[k] == 0) continue;
        const bool passed = read && static_cast<std::int32_t>(seen_[k] - expected_[k]) >= 0;
        if (passed && posted_[k] == seen_[slots + k]) continue;
        pending +=
            cat(pending.empty() ? "" : "; ", phase % kPhases == 0 ? "ready" : "done",
                phase >= kPhases ? " (graph)" : "", " with rank ", p, ": flag ",
                read ? std::to_string(seen_[k]) : std::string("unreadable"), ", awaited ", expected_[k], ", posted ",
                posted_[k], " (outbox ", read ? std::to_string(seen_[slots + k]) : std::string("unreadable"), ")");
      }
    }
    // Every flag set to what the latest enqueued wait on it waits for: every wait already enqueued passes.
    cudaMemcpyAsync(flags_, expected_.data(), slots * sizeof(std::uint32_t), cudaMemcpyHostToDevice, side);
    drain();
    cudaGetLastError();
    return pending;
  }

 private:
  // A stream-operation flag: `phase` 0..kFlagSlots-1 (the graph set from kPhases on).
  size_t slot(int phase, int rank) const { return static_cast<size_t>(phase) * n_ + rank; }

  // In `owner`'s flags: the epoch of fused step `step`, phase `phase`, posted by rank `from`.
  unsigned long long* fused_slot(int owner, int step, int phase, int from) const {
    const size_t index = (static_cast<size_t>(step) * kPhases + phase) * n_ + from;
    return reinterpret_cast<unsigned long long*>(fused_base_[owner]) + index;
  }

  // The second round of an exposure: every rank's publications and retirements (`bytes`: the largest rank's).
  void publish(size_t bytes) {
    std::vector<std::byte> out(bytes), in(bytes * n_);
    std::memcpy(out.data(), fresh_.data(), fresh_.size() * sizeof(Publication));
    std::memcpy(out.data() + fresh_.size() * sizeof(Publication), retired_.data(),
                retired_.size() * sizeof(std::uint64_t));
    gather_in_pieces(comm_, out.data(), in.data(), bytes, piece_);
    const size_t record = mine_.size();
    for (int p = 0; p < n_; ++p) {
      if (p == me_ || !reachable_[p]) continue;
      ExposureHead h;
      std::memcpy(&h, all_.data() + p * record, sizeof h);
      std::vector<Publication> pubs(h.fresh);
      std::vector<std::uint64_t> gone(h.retired);
      const std::byte* from = in.data() + p * bytes;
      std::memcpy(pubs.data(), from, pubs.size() * sizeof(Publication));
      std::memcpy(gone.data(), from + pubs.size() * sizeof(Publication), gone.size() * sizeof(std::uint64_t));
      readers_.forget(p, gone);  // (an id retired and published again in one exposure: freed, then a new allocation)
      readers_.learn(p, pubs);
    }
  }

  // Maps rank `peer`'s flags.
  void* open_flags(int peer, const cudaIpcMemHandle_t& handle) {
    void* p = nullptr;
    cudaError_t e = cudaIpcOpenMemHandle(&p, handle, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess) {
      cudaGetLastError();
      fail(ErrorKind::kBackend, cat("rank ", me_, " cannot map rank ", peer,
                                    "'s GPU memory (cudaIpcOpenMemHandle: ", cudaGetErrorString(e), ")"));
    }
    flags_mapped_.push_back(p);
    return p;
  }

  Communicator& comm_;
  Device& device_;
  int ordinal_, n_, me_;
  int sm_count_ = 0;
  size_t fused_offset_ = 0;
  std::vector<std::byte*> fused_base_;  // every rank's fused epochs, as this rank addresses them
  int* error_ = nullptr;                // host-mapped, set by a fused kernel that gave up
  int* error_device_ = nullptr;
  std::uint32_t* flags_ = nullptr;               // [phase][rank]: 1 when that rank posted the phase to this one
  std::uint32_t* one_ = nullptr;                 // the value graph posts copy into peers' slots (1)
  std::uint32_t* outbox_ = nullptr;              // [phase][peer]: eager posts' numbers, copied into peers' slots
  std::vector<std::uint32_t> posted_, awaited_;  // [phase][peer]: eager posts made and waits enqueued
  std::vector<std::uint32_t> expected_;          // [phase][peer]: the value the latest enqueued wait waits for
  std::uint32_t* seen_ = nullptr;                // pinned: flags then outbox as release() read them
  bool trace_ = false;                           // RESHARD_TRACE_OPS=1: posts and waits as they are enqueued
  // A post to a rank of this process is a stream write-value operation straight into its flag (preceded by the
  // operation's memory fence), not a copy-engine copy from the outbox: such a copy into another GPU's memory can wait
  // on that GPU's hardware queues, which the stream waits of the ranks there hold (ranks sharing GPUs deadlock with
  // copies; docs/transports.md). RESHARD_FLAG_POSTS=copy restores the copies (to measure them); posts to other
  // processes are always copies.
  bool direct(int peer) const { return cards_[peer].pid == cards_[me_].pid; }
  std::unique_ptr<CudaStream> side_;  // release() only
  std::vector<Card> cards_;
  std::vector<std::uint32_t*> peer_flags_;
  std::vector<bool> reachable_;
  std::map<int, std::string> why_;
  std::vector<RankBuffers> peers_;
  std::vector<const void*> peer_inputs_;  // [peer * tensors + tensor]
  std::vector<void*> peer_outputs_, peer_works_;
  size_t tensors_ = 1;
  std::vector<void*> flags_mapped_;  // the peers' flags mapped through IPC
  PeerAllocations readers_;
  std::unique_ptr<OwnedAllocations> owned_;
  std::vector<std::byte> mine_, all_, piece_;  // exposure records: this rank's, every rank's, a gathered piece
  std::vector<Publication> fresh_;
  std::vector<std::uint64_t> retired_;
  std::vector<CUstreamBatchMemOpParams> ops_;
};

}  // namespace

std::unique_ptr<PeerLink> connect_cuda_peers(Communicator& comm, Device& device, int ordinal) {
  return std::make_unique<CudaPeerLink>(comm, device, ordinal);
}

}  // namespace reshard::cuda
