// How p2p transfers are cut into pipeline chunks. Sender and receiver apply the same rule to the same transfer,
// so their messages always match: a transfer that must be packed (its region is not contiguous in the sender's
// tensor) or unpacked (not contiguous in the receiver's) is split along its leading dim into
// ceil(bytes / chunk_bytes) chunks (at most kMaxStages, at most one per row); every other transfer is one chunk.
#pragma once

#include <algorithm>

#include "reshard/box.hpp"

namespace reshard::detail {

inline constexpr int kMaxStages = 16;

inline int chunk_count(const Box& region, const Box& sender_box, const Box& receiver_box, int element_size,
                       Index chunk_bytes) {
  if (chunk_bytes <= 0 || is_empty(region)) return 1;
  if (is_contiguous_in(sender_box, region) && is_contiguous_in(receiver_box, region)) return 1;
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

}  // namespace reshard::detail
