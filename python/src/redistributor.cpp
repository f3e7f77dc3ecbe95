#include "redistributor.hpp"

namespace reshard::python {

Redistributor::Redistributor(Plan plan, Communicator& comm, Device& device)
    : plan_(std::move(plan)), executor_(std::make_unique<Executor>(plan_, comm, device)) {}

Redistributor::~Redistributor() = default;

size_t Redistributor::input_bytes() const { return executor_->input_bytes(); }
size_t Redistributor::output_bytes() const { return executor_->output_bytes(); }
size_t Redistributor::workspace_bytes() const { return executor_->workspace_bytes(); }

void Redistributor::run(const void* input, void* output, StreamHandle stream) {
  executor_->run(ConstBuffer{input, executor_->input_bytes()}, MutableBuffer{output, executor_->output_bytes()},
                 stream);
}

void Redistributor::wait(StreamHandle stream) { executor_->wait(stream); }

}  // namespace reshard::python
