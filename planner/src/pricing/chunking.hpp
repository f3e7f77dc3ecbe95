// How p2p transfers are cut into pipeline chunks, and where the chunks' scratch lives. Sender and receiver apply
// the same rule to the same transfer, so their messages always match: a transfer that must be packed (its region
// is not contiguous in the sender's tensor) or copied out on arrival (not contiguous in the receiver's, or a
// contribution the receiver reduces) is split along its leading dim into ceil(bytes / chunk_bytes) chunks (at
// most kMaxStages, at most one per row); every other transfer is one chunk. Chunk i goes to stage i.
//
// Scratch: a step of one stage takes one area per copied transfer. A pipelined step keeps its scratch in two
// rotating slots, each the size of its largest stage: stage i uses slot i % 2, so the executor makes stage i wait
// until stage i - 2 has sent and unpacked before reusing the slot. Workspace thus shrinks with the chunk size,
// which is how a memory budget is met.
#pragma once

#include "reshard/checked_math.hpp"

#include <algorithm>
#include <vector>

#include "reshard/box.hpp"
#include "reshard/error.hpp"

namespace reshard::detail {

inline constexpr int kMaxStages = 64;

// Elements rounded up to the 256-byte alignment of scratch areas.
inline Index aligned_elements(Index elements, int element_size) {
  const Index align = std::max<Index>(1, 256 / element_size);
  return checked_add(elements, align - 1, "an aligned workspace size") / align * align;
}

// `receiver_copies`: the receiver copies the transfer out of scratch whatever its contiguity (reductions).
inline int chunk_count(const Box& region, const Box& sender_box, const Box& receiver_box, int element_size,
                       Index chunk_bytes, bool receiver_copies = false) {
  if (chunk_bytes <= 0 || is_empty(region)) return 1;
  if (!receiver_copies && is_contiguous_in(sender_box, region) && is_contiguous_in(receiver_box, region)) return 1;
  int lead = 0;
  while (lead + 1 < region.ndim() && region.shape[lead] == 1) ++lead;
  Index bytes = volume(region) * element_size;
  Index k = std::min<Index>({ceil_div(bytes, chunk_bytes), region.ndim() ? region.shape[lead] : 1, kMaxStages});
  return static_cast<int>(std::max<Index>(1, k));
}

// Chunk i of k: rows [i * n / k, (i + 1) * n / k) of the leading dim (the first with extent > 1).
inline Box chunk_of(const Box& region, int k, int i) {
  if (k == 1) return region;
  int lead = 0;
  while (lead + 1 < region.ndim() && region.shape[lead] == 1) ++lead;
  Box c = region;
  Index n = region.shape[lead];
  Index begin = n * i / k, end = n * (i + 1) / k;
  c.offset[lead] = region.offset[lead] + begin;
  c.shape[lead] = end - begin;
  return c;
}

// One rank's scratch for one exchange step, stage by stage (aligned elements).
class StageScratch {
 public:
  explicit StageScratch(int element_size) : es_(element_size) {}
  // Empty again (keeping its memory, for pricers that reuse one per rank).
  void clear(int element_size) {
    es_ = element_size;
    need_.clear();
  }
  // Accounts the scratch areas of one side of a transfer cut into k chunks (of `count` such transfers).
  void add_chunks(const Box& region, int k, Index count = 1) {
    if (static_cast<int>(need_.size()) < k) need_.resize(k, 0);
    for (int i = 0; i < k; ++i) need_[i] += aligned_elements(volume(chunk_of(region, k, i)), es_) * count;
  }
  bool pipelined() const { return need_.size() > 1; }
  Index slot() const { return need_.empty() ? 0 : *std::max_element(need_.begin(), need_.end()); }
  // Elements the step's scratch takes.
  Index total() const { return pipelined() ? 2 * slot() : slot(); }
  // Where stage i's areas start, relative to the step's scratch.
  Index stage_offset(int stage) const { return pipelined() ? (stage % 2) * slot() : 0; }

  // Hands out the areas add_chunks accounted, stage by stage (in any order within a stage): element offsets
  // relative to the step's scratch. Taking more than was accounted is a bug (kInternal).
  class Cursor {
   public:
    explicit Cursor(const StageScratch& scratch) : s_(scratch), used_(scratch.need_.size(), 0) {}
    Index take(int stage, Index elements) {
      const Index size = aligned_elements(elements, s_.es_);
      if (stage < 0 || stage >= static_cast<int>(used_.size()) || used_[stage] + size > s_.need_[stage])
        fail(ErrorKind::kInternal, "lowering takes scratch the step geometry did not account for");
      const Index at = s_.stage_offset(stage) + used_[stage];
      used_[stage] += size;
      return at;
    }

   private:
    const StageScratch& s_;
    std::vector<Index> used_;
  };

 private:
  int es_;
  std::vector<Index> need_;
};

}  // namespace reshard::detail
