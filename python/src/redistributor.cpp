#include "redistributor.hpp"

namespace reshard::python {
namespace {

// Python hands over tensors from allocators that may give one rank the same block again and another rank a new one:
// one-sided plans that address the peers' tensors map them on every run (ExecutorOptions::buffer_changes); staged
// plans (PlanOptions::buffers_change, which reshard.torch plans with) map once.
ExecutorOptions options() {
  ExecutorOptions o;
  o.buffer_changes = BufferChanges::kAnyRank;
  return o;
}

}  // namespace

Redistributor::Redistributor(Plan plan, Communicator& comm, Device& device)
    : plan_(std::move(plan)), executor_(std::make_unique<Executor>(plan_, comm, device, options())) {}

Redistributor::~Redistributor() = default;

size_t Redistributor::input_bytes() const { return executor_->input_bytes(); }
size_t Redistributor::output_bytes() const { return executor_->output_bytes(); }
size_t Redistributor::workspace_bytes() const { return executor_->workspace_bytes(); }

void Redistributor::run(const void* input, void* output, StreamHandle stream) {
  executor_->run(ConstBuffer{input, executor_->input_bytes()}, MutableBuffer{output, executor_->output_bytes()},
                 stream);
}

void Redistributor::wait(StreamHandle stream) { executor_->wait(stream); }

BatchRedistributor::BatchRedistributor(PlanBatch batch, Communicator& comm, Device& device)
    : batch_(std::move(batch)),
      executor_(std::make_unique<Executor>(batch_, comm, device, options())),
      in_(batch_.size()),
      out_(batch_.size()) {}

BatchRedistributor::~BatchRedistributor() = default;

void BatchRedistributor::run(const std::vector<const void*>& inputs, const std::vector<void*>& outputs,
                             StreamHandle stream) {
  RESHARD_REQUIRE(inputs.size() == batch_.size() && outputs.size() == batch_.size(), "a batch of ", batch_.size(),
                  " tensors got ", inputs.size(), " inputs and ", outputs.size(), " outputs");
  for (size_t t = 0; t < batch_.size(); ++t) {
    in_[t] = ConstBuffer{inputs[t], executor_->input_bytes(t)};
    out_[t] = MutableBuffer{outputs[t], executor_->output_bytes(t)};
  }
  executor_->run(in_, out_, stream);
}

void BatchRedistributor::wait(StreamHandle stream) { executor_->wait(stream); }

}  // namespace reshard::python
