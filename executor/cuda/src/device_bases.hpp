// The kernels' view of a run's buffers (internal to the CUDA backend): this rank's three, and the peers' that a batch
// reads one-sided, each under a small integer code.
#pragma once

#include <vector>

#include "kernels.hpp"
#include "reshard/backend.hpp"

namespace reshard::cuda {

// Assigns buffer codes to the references of one batch (prepare time) and fills the kernels' table from a run's
// bases (run time: a few pointer copies, no allocation).
class BaseTable {
 public:
  // The code of `ref`'s buffer: 0..2 for this rank's; 3 + 3 * slot + buffer for a peer's (a slot per distinct peer).
  int code(const BufferRef& ref) {
    const int buffer = static_cast<int>(ref.buffer);
    if (ref.peer < 0) return buffer;
    int slot = 0;
    while (slot < static_cast<int>(peers_.size()) && peers_[slot] != ref.peer) ++slot;
    if (slot == static_cast<int>(peers_.size())) {
      RESHARD_REQUIRE(slot < kMaxPeerSlots, "a batch reads from more than ", kMaxPeerSlots, " peers");
      peers_.push_back(ref.peer);
    }
    return 3 + 3 * slot + buffer;
  }

  DeviceBases fill(const BufferBases& b) const {
    DeviceBases d;
    d.ptr[0] = b.input;
    d.ptr[1] = b.output;
    d.ptr[2] = b.work;
    for (size_t s = 0; s < peers_.size(); ++s) {
      const RankBuffers& p = b.peers[peers_[s]];
      d.ptr[3 + 3 * s] = p.input;
      d.ptr[4 + 3 * s] = p.output;
      d.ptr[5 + 3 * s] = p.work;
    }
    return d;
  }

 private:
  std::vector<int> peers_;
};

}  // namespace reshard::cuda
