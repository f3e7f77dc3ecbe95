// A prepared redistribution on one rank: its plan and the executor built for it. This is the only place the Python
// bindings construct or run an Executor (host threads in run_host, one GPU per process in reshard.torch), so a change
// of the executor's interface touches this file alone.
#pragma once

#include <memory>
#include <vector>

#include "reshard/executor.hpp"
#include "reshard/plan.hpp"
#include "reshard/plan_batch.hpp"

namespace reshard::python {

class Redistributor {
 public:
  // Collective over the plan's ranks, as the Executor: every rank constructs its Redistributor together.
  Redistributor(Plan plan, Communicator& comm, Device& device);
  ~Redistributor();
  Redistributor(const Redistributor&) = delete;
  Redistributor& operator=(const Redistributor&) = delete;

  const Plan& plan() const { return plan_; }
  size_t input_bytes() const;
  size_t output_bytes() const;
  size_t workspace_bytes() const;

  // Enqueues the redistribution of this rank's source local tensor into its target local tensor on `stream` (both
  // dense row-major, input_bytes() and output_bytes() long). No allocation, no host synchronisation.
  void run(const void* input, void* output, StreamHandle stream);
  // Waits for the work enqueued on `stream` (host backend: returns at once; work is done when run() returns).
  void wait(StreamHandle stream);

 private:
  Plan plan_;
  std::unique_ptr<Executor> executor_;
};

// The same for a batch of tensors (plan_batch.hpp): one executor, one call for every tensor.
class BatchRedistributor {
 public:
  BatchRedistributor(PlanBatch batch, Communicator& comm, Device& device);
  ~BatchRedistributor();
  BatchRedistributor(const BatchRedistributor&) = delete;
  BatchRedistributor& operator=(const BatchRedistributor&) = delete;

  const PlanBatch& batch() const { return batch_; }
  // Enqueues every tensor's redistribution: inputs[i] and outputs[i] are tensor i's local tensors (dense row-major,
  // the executor's input_bytes(i) and output_bytes(i) long).
  void run(const std::vector<const void*>& inputs, const std::vector<void*>& outputs, StreamHandle stream);
  void wait(StreamHandle stream);

 private:
  PlanBatch batch_;
  std::unique_ptr<Executor> executor_;
  std::vector<ConstBuffer> in_;
  std::vector<MutableBuffer> out_;
};

}  // namespace reshard::python
