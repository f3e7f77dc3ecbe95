// A host all-gather among the processes (or threads) of one machine through a POSIX shared-memory segment: each rank
// writes its record into its own slot and publishes a call number; the others copy it out once every rank's number
// has reached theirs. No device, no network: a few microseconds where NCCL's all-gather, whose kernels queue behind a
// run's copies on the same links, takes tens to hundreds (docs/transports.md). The NCCL communicator uses it for
// Communicator::all_gather_host when every rank is on one host (nccl_communicator.cpp).
//
// Setup is collective over an existing host all-gather (`Gather`, authenticated by whatever set up the ranks): rank 0
// creates the segment under a random name with mode 0600 and O_EXCL, the name travels through `gather`, every rank
// opens it and checks its owner, mode, size and header, and rank 0 unlinks the name once all have opened it (or any
// failed), so nothing else can open it afterwards and nothing is left behind. If any rank cannot create or open it,
// connect() returns null on every rank alike and the caller keeps its own all-gather.
//
// Each slot holds two records (by call parity): a rank writes call k+1's record only after every rank has published
// k, and a rank publishes k+1 only after it has copied every record of call k, so a record is never overwritten while
// a peer still reads it. A peer's number must be k or k+1 while this rank is in call k; anything else is refused.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace reshard::detail {

// The same on every process of one machine and different between machines: a hash of the host name and the boot id
// (a container's host name may repeat on other machines). Ranks that may share memory compare it.
std::uint64_t machine_id();

class HostMailbox {
 public:
  // A host all-gather over the same ranks (setup only): every rank's `bytes` from send into recv, rank order.
  using Gather = std::function<void(const void* send, void* recv, size_t bytes)>;

  static constexpr int kMaxRanks = 1024;
  static constexpr size_t kMaxRecordBytes = 64 << 10;

  // Collective: every rank calls with the same size and record capacity (1..kMaxRecordBytes). Null on every rank
  // when some rank could not create or open the segment (no /dev/shm, another IPC namespace); kInvalidArgument for
  // arguments out of range.
  static std::unique_ptr<HostMailbox> connect(int rank, int size, size_t capacity, const Gather& gather);

  ~HostMailbox();
  HostMailbox(const HostMailbox&) = delete;
  HostMailbox& operator=(const HostMailbox&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  size_t capacity() const { return capacity_; }

  // Collective: every rank's `bytes` (at most capacity(), the same on every rank) from send into recv, rank order.
  // Polls (yielding the core) for the first 2 ms, then sleeps 50 us between polls. kTimeout naming the ranks that had
  // not arrived after `timeout`; also gives up (kBackend) when `stop` returns true (polled every 50 us). After an error
  // every later call fails at once: the ranks are no longer in step.
  void all_gather(const void* send, void* recv, size_t bytes, std::chrono::milliseconds timeout,
                  const std::function<bool()>& stop = {});

 private:
  HostMailbox(int rank, int size, size_t capacity, void* map, size_t map_bytes);
  std::uint64_t* number(int rank) const;
  std::byte* record(int rank, std::uint64_t call) const;

  int rank_, size_;
  size_t capacity_;      // bytes a record may hold
  size_t record_bytes_;  // a record's space: capacity_ rounded up to a cache line
  size_t stride_;        // bytes per rank's slot (its number's cache line and two records)
  void* map_;
  size_t map_bytes_;
  std::uint64_t calls_ = 0;
  std::string broken_;  // why the ranks are out of step (after an error)
};

}  // namespace reshard::detail
