// A prepared redistribution on one rank: its plan and the executor built for it. This is the only place the Python
// bindings construct or run an Executor (host threads in run_host, one GPU per process in reshard.torch), so a change
// of the executor's interface touches this file alone.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "reshard/executor.hpp"
#include "reshard/plan.hpp"
#include "reshard/plan_batch.hpp"

namespace reshard::python {

// Plans the same redistribution on the NCCL transport: what a one-sided plan falls back to when a run's buffers cannot
// be mapped by the peers (Executor::run's kUnmappable, the same on every rank). Unset: such runs fail.
using FallbackPlans = std::function<PlanBatch()>;

// Runs a primary executor and, from the first run whose buffers the peers could not map on, the fallback plan's
// executor instead (built then: collectively, as every rank gets kUnmappable on the same run).
class FallbackRunner {
 public:
  FallbackRunner(std::unique_ptr<Executor> primary, FallbackPlans plans, Communicator& comm, Device& device);
  ~FallbackRunner();
  const Executor& primary() const { return *primary_; }
  void run(std::span<const ConstBuffer> inputs, std::span<const MutableBuffer> outputs, StreamHandle stream);
  void wait(StreamHandle stream);
  size_t fallback_runs() const { return fallback_runs_; }

 private:
  std::unique_ptr<Executor> primary_;
  FallbackPlans plans_;
  Communicator& comm_;
  Device& device_;
  std::unique_ptr<PlanBatch> fallback_batch_;
  std::unique_ptr<Executor> fallback_;
  size_t fallback_runs_ = 0;
};

class Redistributor {
 public:
  // Collective over the plan's ranks, as the Executor: every rank constructs its Redistributor together.
  Redistributor(Plan plan, Communicator& comm, Device& device, FallbackPlans fallback = {});
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
  // Runs that went to the fallback plan.
  size_t fallback_runs() const { return runner_.fallback_runs(); }

 private:
  Plan plan_;
  FallbackRunner runner_;
};

// The same for a batch of tensors (plan_batch.hpp): one executor, one call for every tensor.
class BatchRedistributor {
 public:
  BatchRedistributor(PlanBatch batch, Communicator& comm, Device& device, FallbackPlans fallback = {});
  ~BatchRedistributor();
  BatchRedistributor(const BatchRedistributor&) = delete;
  BatchRedistributor& operator=(const BatchRedistributor&) = delete;

  const PlanBatch& batch() const { return batch_; }
  size_t input_bytes(size_t tensor) const { return runner_.primary().input_bytes(tensor); }
  size_t output_bytes(size_t tensor) const { return runner_.primary().output_bytes(tensor); }
  // Enqueues every tensor's redistribution: inputs[i] and outputs[i] are tensor i's local tensors (dense row-major,
  // input_bytes(i) and output_bytes(i) long).
  void run(const std::vector<const void*>& inputs, const std::vector<void*>& outputs, StreamHandle stream);
  void wait(StreamHandle stream);
  size_t fallback_runs() const { return runner_.fallback_runs(); }

 private:
  PlanBatch batch_;
  FallbackRunner runner_;
  std::vector<ConstBuffer> in_;
  std::vector<MutableBuffer> out_;
};

}  // namespace reshard::python
