// One rank's timed, verified run on its GPU, as every in-process and per-process GPU run of the harness does it: two
// poisoned verification runs, warm-up, optional CUDA-graph capture, the timed loop (stall-guarded), a final check and
// an optional traced run.
#pragma once

#include <functional>

#include "reshard/harness.hpp"

namespace reshard::detail {

// Runs `plan` for rank comm.rank() on GPU `device_ordinal`. A timed loop that makes no progress for options.timeout
// calls `abort_comm` (so that nothing is left waiting on a peer while the rank unwinds), then fails with kTimeout.
// `prepared` (if set) runs once every buffer of this rank exists, before its first run (ranks sharing a GPU meet
// there: a peer still preparing may synchronise the GPU, which would wait for this rank's waits on that peer).
// `finished` (if set) runs once this rank's last run has drained, before anything is freed (ranks sharing a GPU meet
// there too: freeing synchronises the whole GPU, so a rank that finished early would wait, inside CUDA, for a peer's
// waits on a third rank, which can be blocked inside CUDA behind it).
RankOutcome run_timed_rank(const Plan& plan, Communicator& comm, int device_ordinal, const RunOptions& options,
                           const std::function<void()>& abort_comm, const std::function<void()>& prepared = {},
                           const std::function<void()>& finished = {});
// The same for every tensor of a batch, in one executor call per run.
RankOutcome run_timed_rank(const PlanBatch& batch, Communicator& comm, int device_ordinal, const RunOptions& options,
                           const std::function<void()>& abort_comm, const std::function<void()>& prepared = {},
                           const std::function<void()>& finished = {});

}  // namespace reshard::detail
