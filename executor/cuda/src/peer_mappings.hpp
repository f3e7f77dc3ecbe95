// The bookkeeping of CudaPeerLink::expose (internal to the CUDA backend): which of its allocations a rank has
// published to its peers, and which of the peers' allocations this rank has mapped.
//
// An allocation is published once, with its CUDA IPC handle, the first time one of its buffers is exposed; later
// exposures name a buffer by (allocation id, offset) only, and the readers keep their mapping of it. So a caller whose
// tensors come from a caching allocator pays one cudaIpcOpenMemHandle per allocation and reader, not per call. The
// owner retires a publication (every reader closes its mapping) when the allocation was freed (a new allocation
// covers its addresses) or when its publications not exposed by the latest exposure pass a limit, least recently
// exposed first: a reader's mapping keeps the owner's freed memory from returning to the driver.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <span>
#include <unordered_map>
#include <vector>

#include "reshard/backend.hpp"

namespace reshard::cuda {

// An allocation as its owner publishes it.
struct Publication {
  std::uint64_t id = 0;    // the driver's buffer id: unique within the owner's process
  std::uint64_t base = 0;  // in the owner's address space
  std::uint64_t bytes = 0;
  cudaIpcMemHandle_t handle{};  // unset when every reader is in the owner's process
};

// A buffer as an exposure names it: its allocation (id 0: no buffer) and its byte offset in it.
struct BufferName {
  std::uint64_t id = 0, offset = 0;
};

// The owner's side.
class OwnedAllocations {
 public:
  // `handles`: some reader is another process (publications carry IPC handles). `stale_bytes`, `stale_count`: how
  // much of what is published but not exposed by the latest exposure stays published.
  OwnedAllocations(bool handles, std::uint64_t stale_bytes, size_t stale_count)
      : handles_(handles), stale_bytes_(stale_bytes), stale_count_(stale_count) {}

  // Starts an exposure.
  void begin() { ++exposure_; }
  // Names `ptr` (null: no buffer). An allocation not published yet is appended to `fresh` (and retires any
  // publication whose addresses it covers). False when the memory cannot be exported to other processes (no IPC
  // handle: virtual-memory or stream-ordered pool allocations); nothing is published then.
  bool name(const void* ptr, BufferName& out, std::vector<Publication>& fresh, std::vector<std::uint64_t>& retired);
  // Ends an exposure: appends the publications past the stale limits to `retired` and forgets them.
  void end(std::vector<std::uint64_t>& retired);
  size_t published() const { return by_id_.size(); }

 private:
  struct Entry {
    std::uint64_t base = 0, bytes = 0, used = 0;
  };
  void drop(std::uint64_t id, std::vector<std::uint64_t>& retired);

  bool handles_;
  std::uint64_t stale_bytes_;
  size_t stale_count_;
  std::uint64_t exposure_ = 0;
  std::unordered_map<std::uint64_t, Entry> by_id_;
  std::map<std::uint64_t, std::uint64_t> by_base_;  // base -> id
};

// The reader's side: every peer's publications, mapped on first use.
class PeerAllocations {
 public:
  PeerAllocations(int ranks, int me) : peers_(static_cast<size_t>(ranks)), me_(me) {}
  ~PeerAllocations();
  PeerAllocations(const PeerAllocations&) = delete;
  PeerAllocations& operator=(const PeerAllocations&) = delete;

  void learn(int peer, std::span<const Publication> fresh);
  void forget(int peer, std::span<const std::uint64_t> retired);
  // The address of peer `peer`'s buffer `name` in this process: the owner's own address when `same_process`, else
  // through the allocation's IPC mapping, opened on first use (kBackend when the driver refuses it; kInternal for an
  // allocation the peer never published).
  void* address(int peer, const BufferName& name, bool same_process);
  size_t mapped() const { return mapped_; }

 private:
  struct Known {
    Publication pub;
    void* mapped = nullptr;
  };
  std::vector<std::unordered_map<std::uint64_t, Known>> peers_;
  int me_;
  size_t mapped_ = 0;
};

// A host all-gather over `comm` of `bytes` per rank (every rank's into recv, rank order), in pieces of at most 16 KiB
// (what the communicator's shared-memory mailbox carries); `piece`: scratch kept by the caller.
void gather_in_pieces(Communicator& comm, const std::byte* send, std::byte* recv, size_t bytes,
                      std::vector<std::byte>& piece);

}  // namespace reshard::cuda
