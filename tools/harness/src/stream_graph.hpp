// A CUDA graph captured from work enqueued on one stream (thread-local capture mode, so that the other ranks' threads
// of this process keep enqueueing while one captures), and its executable instance. Used by the timed runs
// (timed_rank.cpp) and the contention measurement's CUDA-graph mode (contention_nccl.cpp).
#pragma once

#include <cuda_runtime.h>

#include "reshard/cuda_check.hpp"

namespace reshard::detail {

class StreamGraph {
 public:
  StreamGraph() = default;
  StreamGraph(const StreamGraph&) = delete;
  StreamGraph& operator=(const StreamGraph&) = delete;
  ~StreamGraph() {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
  }

  // Captures what `work` enqueues on `stream` (and on the streams it forks from it), then instantiates it. A failure
  // inside `work` ends the capture before it propagates, so the stream is usable (or at least not left capturing).
  template <class Work>
  void capture(cudaStream_t stream, Work&& work) {
    RESHARD_REQUIRE(!exec_, "a StreamGraph is captured once");
    RESHARD_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    try {
      work();
    } catch (...) {
      cudaGraph_t partial = nullptr;
      if (cudaStreamEndCapture(stream, &partial) == cudaSuccess && partial) cudaGraphDestroy(partial);
      throw;
    }
    RESHARD_CUDA_CHECK(cudaStreamEndCapture(stream, &graph_));
    RESHARD_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
  }
  bool captured() const { return exec_ != nullptr; }
  // Enqueues one replay on `stream`.
  void launch(cudaStream_t stream) { RESHARD_CUDA_CHECK(cudaGraphLaunch(exec_, stream)); }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace reshard::detail
