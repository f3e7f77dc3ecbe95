// RelaxedCapture (internal to the CUDA backend): see below.
#pragma once

#include <cuda_runtime.h>

#include "reshard/cuda_check.hpp"

namespace reshard::cuda {

// Mapping buffers talks to the peers from the host (an all-gather over the communicator, IPC calls), which global
// stream capture forbids on the capturing thread; this thread switches to relaxed capture for that while, as NCCL's own
// setup does. Nothing of it is captured: the graph keeps the addresses mapped at capture.
class RelaxedCapture {
 public:
  RelaxedCapture() { RESHARD_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode_)); }
  ~RelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&mode_); }
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

}  // namespace reshard::cuda
