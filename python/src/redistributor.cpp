#include "redistributor.hpp"

namespace reshard::python {
namespace {

// Python hands over tensors from allocators that may give one rank the same block again and another rank a new one:
// one-sided plans that address the peers' tensors map them on every run (ExecutorOptions::buffers_change; mappings are
// kept per allocation, so a run on blocks mapped before exchanges offsets only); staged plans
// (PlanOptions::buffers_change, which reshard.torch plans with) map once.
ExecutorOptions options() {
  ExecutorOptions o;
  o.buffers_change = BuffersChange::kAnyRank;
  return o;
}

}  // namespace

FallbackRunner::FallbackRunner(std::unique_ptr<Executor> primary, FallbackPlans plans, Communicator& comm,
                               Device& device)
    : primary_(std::move(primary)), plans_(std::move(plans)), comm_(comm), device_(device) {}

FallbackRunner::~FallbackRunner() = default;

void FallbackRunner::run(std::span<const ConstBuffer> inputs, std::span<const MutableBuffer> outputs,
                         StreamHandle stream) {
  if (!fallback_) {
    try {
      return primary_->run(inputs, outputs, stream);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kUnmappable || !plans_) throw;
    }
    fallback_batch_ = std::make_unique<PlanBatch>(plans_());
    fallback_ = std::make_unique<Executor>(*fallback_batch_, comm_, device_, options());
  }
  ++fallback_runs_;
  fallback_->run(inputs, outputs, stream);
}

void FallbackRunner::wait(StreamHandle stream) { (fallback_ ? fallback_ : primary_)->wait(stream); }

Redistributor::Redistributor(Plan plan, Communicator& comm, Device& device, FallbackPlans fallback)
    : plan_(std::move(plan)),
      runner_(std::make_unique<Executor>(plan_, comm, device, options()), std::move(fallback), comm, device) {}

Redistributor::~Redistributor() = default;

size_t Redistributor::input_bytes() const { return runner_.primary().input_bytes(); }
size_t Redistributor::output_bytes() const { return runner_.primary().output_bytes(); }
size_t Redistributor::workspace_bytes() const { return runner_.primary().workspace_bytes(); }

void Redistributor::run(const void* input, void* output, StreamHandle stream) {
  const ConstBuffer in{input, input_bytes()};
  const MutableBuffer out{output, output_bytes()};
  runner_.run(std::span<const ConstBuffer>(&in, 1), std::span<const MutableBuffer>(&out, 1), stream);
}

void Redistributor::wait(StreamHandle stream) { runner_.wait(stream); }

BatchRedistributor::BatchRedistributor(PlanBatch batch, Communicator& comm, Device& device, FallbackPlans fallback)
    : batch_(std::move(batch)),
      runner_(std::make_unique<Executor>(batch_, comm, device, options()), std::move(fallback), comm, device),
      in_(batch_.size()),
      out_(batch_.size()) {}

BatchRedistributor::~BatchRedistributor() = default;

void BatchRedistributor::run(const std::vector<const void*>& inputs, const std::vector<void*>& outputs,
                             StreamHandle stream) {
  RESHARD_REQUIRE(inputs.size() == batch_.size() && outputs.size() == batch_.size(), "a batch of ", batch_.size(),
                  " tensors got ", inputs.size(), " inputs and ", outputs.size(), " outputs");
  for (size_t t = 0; t < batch_.size(); ++t) {
    in_[t] = ConstBuffer{inputs[t], input_bytes(t)};
    out_[t] = MutableBuffer{outputs[t], output_bytes(t)};
  }
  runner_.run(in_, out_, stream);
}

void BatchRedistributor::wait(StreamHandle stream) { runner_.wait(stream); }

}  // namespace reshard::python
