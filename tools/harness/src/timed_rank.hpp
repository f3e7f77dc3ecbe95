// One rank's timed, verified run on its GPU, as every in-process and per-process GPU run of the harness does it: two
// poisoned verification runs, warm-up, optional CUDA-graph capture, the timed loop (stall-guarded), a final check and
// an optional traced run.
#pragma once

#include <cuda_runtime.h>

#include <functional>

#include "reshard/cuda_check.hpp"
#include "reshard/harness.hpp"

namespace reshard::detail {

// Owns a captured CUDA graph and its executable instance.
class CudaGraph {
 public:
  ~CudaGraph() {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
  }
  template <class F>
  void capture(cudaStream_t stream, F work) {
    RESHARD_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    work();
    RESHARD_CUDA_CHECK(cudaStreamEndCapture(stream, &graph_));
    RESHARD_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
  }
  void launch(cudaStream_t stream) { RESHARD_CUDA_CHECK(cudaGraphLaunch(exec_, stream)); }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

// Runs `plan` for rank comm.rank() on GPU `device_ordinal`. A timed loop that makes no progress for options.timeout
// calls `abort_comm` (so that nothing is left waiting on a peer while the rank unwinds), then fails with kTimeout.
// `prepared` (if set) runs once every buffer of this rank exists, before its first run (ranks sharing a GPU meet
// there: a peer still preparing may synchronise the GPU, which would wait for this rank's waits on that peer).
RankOutcome run_timed_rank(const Plan& plan, Communicator& comm, int device_ordinal, const RunOptions& options,
                           const std::function<void()>& abort_comm, const std::function<void()>& prepared = {});

}  // namespace reshard::detail
