#include "nccl_rank.hpp"

#include <vector>

#include "reshard/cuda_check.hpp"
#include "reshard/harness.hpp"
#include "reshard/pattern.hpp"

namespace reshard::detail {

RankRedistribution::RankRedistribution(const Plan& plan, Communicator& comm, CudaDevice& device,
                                       const ExecutorOptions& options, int buffer_sets)
    : RankRedistribution(PlanBatch::of(plan), comm, device, options, buffer_sets) {}

RankRedistribution::RankRedistribution(PlanBatch batch, Communicator& comm, CudaDevice& device,
                                       const ExecutorOptions& options, int buffer_sets)
    : batch_(std::move(batch)),
      rank_(comm.rank()),
      stream_(device.ordinal()),
      pattern_(device),
      exec_(batch_, comm, device, options) {
  RESHARD_REQUIRE(buffer_sets >= 1, "a run needs at least one buffer set, got ", buffer_sets);
  for (size_t t = 0; t < batch_.size(); ++t) {
    const Plan& plan = batch_.plan(t);
    Tensor& x = tensors_.emplace_back();
    x.in_place = runs_in_place(batch_, t);
    x.partial = plan.src().has_partial() || plan.dst().has_partial();
    x.in_box = plan.src().box(rank_);
    x.out_box = plan.dst().box(rank_);
  }
  // The first set's sources are filled with the pattern; the others copy them.
  sets_.resize(static_cast<size_t>(buffer_sets));
  for (BufferSet& set : sets_) {
    for (size_t t = 0; t < batch_.size(); ++t) {
      DeviceMemory& input = *set.input.emplace_back(device.allocate(exec_.input_bytes(t)));
      set.output.push_back(tensors_[t].in_place ? nullptr : device.allocate(exec_.output_bytes(t)));
      DeviceMemory& target = tensors_[t].in_place ? input : *set.output.back();
      set.inputs.push_back({input.data(), input.bytes()});
      set.outputs.push_back({target.data(), target.bytes()});
      if (&set == &sets_.front())
        fill_source(set, t);
      else if (input.bytes())
        RESHARD_CUDA_CHECK(cudaMemcpyAsync(input.data(), sets_.front().inputs[t].data, input.bytes(),
                                           cudaMemcpyDeviceToDevice, stream_.get()));
      if (!tensors_[t].in_place && target.bytes())
        RESHARD_CUDA_CHECK(cudaMemsetAsync(target.data(), 0xA5, target.bytes(), stream_.get()));
    }
  }
}

void RankRedistribution::fill_source(const BufferSet& set, size_t t) {
  const Plan& plan = batch_.plan(t);
  const Tensor& x = tensors_[t];
  void* input = set.input[t]->data();
  if (x.partial) {
    std::vector<unsigned char> host(set.input[t]->bytes());
    fill_local(host.data(), plan.src(), rank_, plan.dtype());
    if (!host.empty()) RESHARD_CUDA_CHECK(cudaMemcpy(input, host.data(), host.size(), cudaMemcpyHostToDevice));
  } else {
    pattern_.fill(input, x.in_box, plan.src().global_shape(), plan.dtype(), stream_.get());
  }
}

void RankRedistribution::use_set(int set) {
  RESHARD_REQUIRE(set >= 0 && static_cast<size_t>(set) < sets_.size(), "buffer set ", set, " of ", sets_.size());
  current_ = static_cast<size_t>(set);
}

Index RankRedistribution::target_elements() const {
  Index n = 0;
  for (const Tensor& x : tensors_) n += volume(x.out_box);
  return n;
}

void RankRedistribution::run() {
  const BufferSet& set = sets_[current_];
  exec_.run(set.inputs, set.outputs, stream_.handle());
}

void RankRedistribution::wait() { exec_.wait(stream_.handle()); }

void RankRedistribution::poison(int byte) {
  const BufferSet& set = sets_[current_];
  for (size_t t = 0; t < tensors_.size(); ++t) {
    if (tensors_[t].in_place)  // the output is the source: filled again instead
      fill_source(set, t);
    else if (set.outputs[t].bytes)
      RESHARD_CUDA_CHECK(cudaMemsetAsync(set.outputs[t].data, byte, set.outputs[t].bytes, stream_.get()));
  }
}

Index RankRedistribution::count_wrong() {
  wait();
  Index wrong = 0;
  const std::vector<MutableBuffer>& outputs = sets_[current_].outputs;
  for (size_t t = 0; t < tensors_.size(); ++t) {
    const Plan& plan = batch_.plan(t);
    const Tensor& x = tensors_[t];
    if (x.partial || plan.converts()) {  // checked on the host: contributions, or the converted pattern
      std::vector<unsigned char> host(outputs[t].bytes);
      if (!host.empty())
        RESHARD_CUDA_CHECK(cudaMemcpy(host.data(), outputs[t].data, host.size(), cudaMemcpyDeviceToHost));
      wrong += count_local_mismatches(host.data(), plan.src(), plan.dst(), rank_, plan.dtype(), plan.target_dtype());
    } else {
      wrong +=
          pattern_.count_mismatches(outputs[t].data, x.out_box, plan.src().global_shape(), plan.dtype(), stream_.get());
    }
  }
  return wrong;
}

}  // namespace reshard::detail
