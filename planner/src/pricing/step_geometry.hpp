// Step geometry: one rank's side of a communicating step, the single source of the rules that pricing and lowering
// share (internal to the planner).
//
// For an exchange (a p2p or all_to_all step) it answers, transfer by transfer: is the transfer staged through scratch
// on the sender (packed) or the receiver (copied or reduced out), or does it move in place; in how many pipeline
// chunks (chunk i goes to stage i); how much scratch each stage takes; and what the rank's traffic is. For gathers
// and scatters it gives the scratch areas of the collective. The pricer sums a rank's geometry (StepPricer); the
// lowering lays the same geometry out in buffers (lowering.cpp), so the priced workspace is the lowered one by
// construction.
//
// Transports: nccl stages a transfer on the side where its region is not contiguous (and always on the receiver of
// a contribution it reduces, or of a message it converts), and pipelines staged transfers in chunks of `chunk_bytes`;
// nvlink stages nothing: every region is copied (or reduced) straight from the sender's tensor into the receiver's, in
// one piece.
#pragma once

#include <algorithm>
#include <span>
#include <vector>

#include "pricing/chunking.hpp"
#include "reshard/cost_model.hpp"
#include "reshard/plan.hpp"
#include "reshard/program.hpp"
#include "reshard/rank_boxes.hpp"

namespace reshard::detail {

// The transfers of one exchange step that involve one rank.
struct RankTransfers {
  std::vector<Transfer> sends, recvs, local;
};

// How an exchange moves its transfers.
struct ExchangeRules {
  Transport transport = Transport::kNccl;
  int element_size = 1;
  Index chunk_bytes = 0;  // nccl: staged transfers are pipelined in chunks of this many bytes (0: whole)
  bool reduces = false;   // the receiver reduces the contributions of a Partial source instead of copying them
  Index copy_engine_min_row_bytes = 0;  // copies with shorter contiguous rows (or over 3-D) run on a kernel
  bool low_sm = false;                  // planned to run beside compute (local_copy_engine_for)
  // nccl: the receiver converts the dtype as it writes its tensor (the last step of a plan with a to_dtype), so it
  // stages every message it receives and its unpack copy converts. Lowering sets it; pricing adds the conversion
  // separately (conversion.hpp).
  bool receiver_converts = false;
};

// How one transfer moves.
struct Movement {
  int chunks = 1;                           // pipeline chunks (chunking.hpp's chunk_of), chunk i in stage i
  bool sender_stages = false;               // packed into the sender's scratch before it is sent
  bool receiver_stages = false;             // received into the receiver's scratch, then copied or reduced out
  CopyEngine engine = CopyEngine::kKernel;  // nvlink: who pulls the region (reductions: always a kernel)
};

// Who copies `region` from a peer's tensor holding `from` to one holding `to` (an nvlink transfer): the copy engines
// when the copy is at most 3-D with contiguous rows of at least `min_row_bytes`, a kernel otherwise.
CopyEngine copy_engine_for(const Box& region, const Box& from, const Box& to, int element_size, Index min_row_bytes);

// Who copies `region` within one rank, from its tensor holding `from` into one holding `to`: the copy engines when the
// region is one contiguous block in both (one cudaMemcpyAsync), the copy kernel otherwise, as within one GPU the
// engines' strided copies (cudaMemcpy2DAsync) run slower than the kernel at any row width while a contiguous block
// copies as fast (between GPUs the engines win from 2 KiB rows; docs/transports.md). In low-SM plans (beside compute)
// local copies follow copy_engine_for's rule instead: there the engines leave the SMs to the compute.
CopyEngine local_copy_engine_for(const Box& region, const Box& from, const Box& to, int element_size,
                                 Index min_row_bytes, bool low_sm);

// The rule, in one place.
Movement movement(const Box& region, const Box& sender_box, const Box& receiver_box, const ExchangeRules& rules);

// One rank's side of an exchange, accumulated transfer by transfer: its traffic (what pricing needs) and its scratch
// stage by stage (what pricing reports and lowering lays out).
class RankExchange {
 public:
  explicit RankExchange(const ExchangeRules& rules) : rules_(rules), scratch_(rules.element_size) {}
  // As if constructed anew with `rules` (keeping its memory).
  void reset(const ExchangeRules& rules) {
    rules_ = rules;
    traffic_ = RankTraffic{};
    scratch_.clear(rules.element_size);
  }

  // A transfer this rank sends (over `link`), or receives, moving as `m` (movement() under this exchange's rules:
  // computed once per transfer by the caller, which accounts it on both of its ranks).
  // `count`: that many transfers of t's shape and size (the planner prices classes of alike transfers at once).
  void send(const Transfer& t, const Movement& m, LinkClass link, Index count = 1);
  void receive(const Transfer& t, const Movement& m, LinkClass link, Index count = 1);
  void local(const Transfer& t, const Box& from, const Box& to);
  // Only what send() (receive()) adds to the scratch: the staging of `count` transfers of `region` moving as `m`.
  void send_scratch(const Box& region, const Movement& m, Index count = 1) {
    if (m.sender_stages) scratch_.add_chunks(region, m.chunks, count);
  }
  void receive_scratch(const Box& region, const Movement& m, Index count = 1) {
    if (m.receiver_stages) scratch_.add_chunks(region, m.chunks, count);
  }

  const ExchangeRules& rules() const { return rules_; }
  const RankTraffic& traffic() const { return traffic_; }
  const StageScratch& scratch() const { return scratch_; }

 private:
  ExchangeRules rules_;
  RankTraffic traffic_;
  StageScratch scratch_;
};

// The transfers of an all_to_all among the rank's group over `dims`: region a(rank) ∩ b(g) to each member g.
RankTransfers all_to_all_transfers(const RankBoxes& a, const RankBoxes& b, std::span<const int> dims, int rank,
                                   int element_size);

// One rank's whole all_to_all exchange over `dims` (a -> b): the same as rank_exchange(all_to_all_transfers(...)),
// without listing the transfers (the pricer's inner loops). Accounted in `x`, reset first (its memory reused), which
// is returned. `scratch_only`: only x.scratch() is accounted (traffic, links and local copies are left out), for
// callers that size the step's workspace.
RankExchange& all_to_all_exchange(const RankBoxes& a, const RankBoxes& b, std::span<const int> dims, int rank,
                                  const ExchangeRules& rules, const Topology& topology, RankExchange& x,
                                  bool scratch_only = false);

// One rank's whole exchange (every transfer of `t`, on `topology`'s links).
RankExchange rank_exchange(const RankTransfers& t, const RankBoxes& a, const RankBoxes& b, int rank,
                           const ExchangeRules& rules, const Topology& topology);

// A rank's workspace: two intermediate tensors, used alternately as the outputs of steps 0..k-2, then the largest
// step's scratch.
class WorkspaceLayout {
 public:
  // `intermediate[i]`: the rank's tensor volume after step i, for the steps but the last.
  WorkspaceLayout(std::span<const Index> intermediate, int element_size) {
    Index temp[2] = {0, 0};
    for (size_t i = 0; i < intermediate.size(); ++i) temp[i % 2] = std::max(temp[i % 2], intermediate[i]);
    temp_offset_[1] = aligned_elements(temp[0], element_size);
    scratch_base_ = checked_add(temp_offset_[1], aligned_elements(temp[1], element_size), "a rank's workspace");
  }
  // Where the output of step i (not the last) lives.
  Index intermediate_offset(size_t step) const { return temp_offset_[step % 2]; }
  Index scratch_base() const { return scratch_base_; }
  Index total(Index scratch) const { return checked_add(scratch_base_, scratch, "a rank's workspace"); }

 private:
  Index temp_offset_[2] = {0, 0};
  Index scratch_base_ = 0;
};

// A staged nvlink step (Step::staged): the copy of the rank's source tensor, at the start of its step scratch, that
// the peers read instead of the caller's tensor (same offsets as in the tensor).
inline Index staged_source_elements(const RankBoxes& a, int rank) { return a.volume(rank); }

// The scratch areas of one rank's gather or scatter (elements, 0 when the side moves in place), taken in this order.
struct CollectiveScratch {
  Index send = 0, recv = 0;
  Index total(int element_size) const {
    return aligned_elements(send, element_size) + aligned_elements(recv, element_size);
  }
};
// kAllGather and kReduceScatter take scratch; every other kind none.
CollectiveScratch collective_scratch(StepKind kind, const RankBoxes& a, const RankBoxes& b, std::span<const int> dims,
                                     int rank);

}  // namespace reshard::detail
