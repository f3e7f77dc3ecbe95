// Lowering of a chain of steps for one rank; shared by lower(), the planner's workspace accounting and tests.
#pragma once

#include <vector>

#include "reshard/program.hpp"

namespace reshard::detail {

// The transfers of one p2p step that involve one rank.
struct RankTransfers {
  std::vector<Transfer> sends, recvs, local;
};

// For every p2p step, the transfers of every rank (index [step][rank]; empty for other steps).
std::vector<std::vector<RankTransfers>> index_transfers(const std::vector<Step>& steps, int nranks);

// Lowers `steps` (starting from layout `src`) for `rank`. `transfers[i]` holds the rank's transfers of step i
// (ignored for steps that are not p2p); transfers needing copies are pipelined in chunks of `chunk_bytes`.
RankProgram lower_steps(const Layout& src, const std::vector<Step>& steps, DType dtype, int rank,
                        const std::vector<RankTransfers>& transfers, Index chunk_bytes);

}  // namespace reshard::detail
