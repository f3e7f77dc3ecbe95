// Lowering one rank's side of an exchange, on either transport, into a step's parts (internal to the planner's
// lowering): the NCCL transport's staged send/receive stages and the NVLink transport's one-sided copies.
#pragma once

#include <functional>
#include <vector>

#include "lowering/op_schedule.hpp"
#include "pricing/step_geometry.hpp"
#include "reshard/partial.hpp"
#include "reshard/rank_boxes.hpp"

namespace reshard::detail {

// Where a rank's tensors live in one step: its L_i tensor (input buffer or an intermediate in the workspace), its
// L_i+1 tensor, and the start of the step's scratch.
struct StepBuffers {
  BufferRef in, out;
  Index scratch_base = 0;
};

// Rank p's tensor of a step, as another rank addresses it (one-sided steps).
using PeerTensor = std::function<BufferRef(int p)>;

// A rank's local copy of `region` from its `from` tensor into its `to` tensor, on the engine the step geometry picks.
void add_local_copy(StepParts& ps, BufferRef in, const Box& from, BufferRef out, const Box& to, const Box& region,
                    const ExchangeRules& rules);

// One rank's side of an exchange step on the NCCL transport: staged transfers are packed into (or received into)
// scratch areas laid out exactly as the geometry accounted them, chunk i of a pipelined transfer in stage i. When
// the step reduces Partial contributions, the receiver gets every contribution of a region into scratch and one
// reduction per chunk writes the region, reading its own contribution in place. Returns the scratch it takes.
Index lower_exchange(StepParts& ps, const RankTransfers& t, const RankBoxes& a, const RankBoxes& b, int rank,
                     const StepBuffers& buf, const ExchangeRules& rules, const PartialRoles* roles);

// One rank's side of a p2p step on the NVLink transport. Pulling, it tells the ranks that read its L_i tensor that
// it is ready, waits for the ranks it reads, copies every region it receives straight out of their L_i tensors into
// its L_i+1 tensor (copy engines or one kernel, as the geometry says) or reduces their contributions in place, then
// tells its sources it is done and waits until its readers are. Pushing (`push`, steps without reductions, not
// fused), it tells its sources that its L_i+1 tensor may be written, waits for the ranks it writes, copies every
// region it sends from its L_i tensor into theirs, then tells them it is done and waits until its sources are.
// Nothing is staged. `peer_in(p)` / `peer_out(p)`: rank p's L_i / L_i+1 tensor.
void lower_one_sided(StepParts& ps, const RankTransfers& t, const std::vector<Transfer>& step_transfers,
                     const RankBoxes& a, const RankBoxes& b, int rank, const StepBuffers& buf,
                     const ExchangeRules& rules, const PartialRoles& roles, bool fused, bool push,
                     const PeerTensor& peer_in, const PeerTensor& peer_out);

}  // namespace reshard::detail
