// One rank's redistribution on its GPU, as every NCCL run of the harness sets it up: the executor, the source tensor
// filled with the pattern, the target buffer, and the check of the target against the pattern. Used by the timed runs
// (harness_nccl.cpp) and by the contention measurement (contention_nccl.cpp).
#pragma once

#include <memory>
#include <vector>

#include "reshard/cuda_device.hpp"
#include "reshard/cuda_pattern.hpp"
#include "reshard/executor.hpp"
#include "reshard/nccl_communicator.hpp"

namespace reshard::detail {

class RankRedistribution {
 public:
  // Collective over the plan's ranks (the executor's construction is). `device` and `plan` must outlive this object.
  // `buffer_sets` sets of sources and targets (RunOptions::buffers), each source filled with the pattern and each
  // target with a poison byte.
  RankRedistribution(const Plan& plan, Communicator& comm, CudaDevice& device, const ExecutorOptions& options,
                     int buffer_sets = 1);
  // Every tensor of a batch, in one executor call per run.
  RankRedistribution(PlanBatch batch, Communicator& comm, CudaDevice& device, const ExecutorOptions& options,
                     int buffer_sets = 1);

  cudaStream_t stream() const { return stream_.get(); }
  size_t workspace_bytes() const { return exec_.workspace_bytes(); }
  Index target_elements() const;

  // The set the next run(), poison() and count_wrong() use (in [0, buffer_sets)).
  void use_set(int set);
  // Enqueues one redistribution of the set's sources into its targets on stream().
  void run();
  // Waits for the enqueued work (the executor's wait, with its timeout).
  void wait();
  // Releases the executor's pending one-sided waits after a stall (Executor::abandon); what was pending.
  std::string abandon() { return exec_.abandon(); }
  // Fills the targets with `byte` on stream(), so that an element no run writes is caught; a tensor in place
  // (runs_in_place) gets its source filled again instead.
  void poison(int byte);
  // Waits, then counts the targets' elements that differ from the redistributed pattern.
  Index count_wrong();
  // Phase times of the last run (ExecutorOptions::trace, after wait()).
  std::vector<StepTime> step_times() const { return exec_.step_times(); }

 private:
  // One tensor's layout facts.
  struct Tensor {
    bool partial = false;   // Partial layouts: contributions and expected values are made on the host (pattern.hpp)
    bool in_place = false;  // runs_in_place: no target buffer, the source is the output
    Box in_box, out_box;
  };
  // Every tensor's buffers, one allocation each (output: unset in place), as the executor takes them.
  struct BufferSet {
    std::vector<std::unique_ptr<DeviceMemory>> input, output;
    std::vector<ConstBuffer> inputs;
    std::vector<MutableBuffer> outputs;
  };
  void fill_source(const BufferSet& set, size_t t);  // tensor t's source with the pattern

  PlanBatch batch_;
  int rank_;
  CudaStream stream_;
  CudaPatternChecker pattern_;
  Executor exec_;
  std::vector<Tensor> tensors_;
  std::vector<BufferSet> sets_;
  size_t current_ = 0;
};

// Runs `body`; on any failure (a stop request included) aborts `comm` first, so that peers and the unwinding of
// this rank's buffers never wait on work that will not complete.
template <class Body>
auto aborting_on_failure(NcclCommunicator& comm, Body&& body) {
  try {
    return body();
  } catch (...) {
    comm.abort();
    throw;
  }
}

}  // namespace reshard::detail
