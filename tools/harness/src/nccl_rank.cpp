#include "nccl_rank.hpp"

#include <vector>

#include "reshard/cuda_check.hpp"
#include "reshard/harness.hpp"
#include "reshard/pattern.hpp"

namespace reshard::detail {

RankRedistribution::RankRedistribution(const Plan& plan, Communicator& comm, CudaDevice& device,
                                       const ExecutorOptions& options)
    : RankRedistribution(PlanBatch::of(plan), comm, device, options) {}

RankRedistribution::RankRedistribution(PlanBatch batch, Communicator& comm, CudaDevice& device,
                                       const ExecutorOptions& options)
    : batch_(std::move(batch)),
      rank_(comm.rank()),
      stream_(device.ordinal()),
      pattern_(device),
      exec_(batch_, comm, device, options) {
  for (size_t t = 0; t < batch_.size(); ++t) {
    const Plan& plan = batch_.plan(t);
    Tensor& x = tensors_.emplace_back();
    x.in_place = runs_in_place(batch_, t);
    x.partial = plan.src().has_partial() || plan.dst().has_partial();
    x.in_box = plan.src().box(rank_);
    x.out_box = plan.dst().box(rank_);
    x.input = device.allocate(exec_.input_bytes(t));
    if (!x.in_place) x.output = device.allocate(exec_.output_bytes(t));
    DeviceMemory& target = x.in_place ? *x.input : *x.output;
    fill_source(t);
    inputs_.push_back({x.input->data(), x.input->bytes()});
    outputs_.push_back({target.data(), target.bytes()});
  }
}

void RankRedistribution::fill_source(size_t t) {
  const Plan& plan = batch_.plan(t);
  Tensor& x = tensors_[t];
  if (x.partial) {
    std::vector<unsigned char> host(x.input->bytes());
    fill_local(host.data(), plan.src(), rank_, plan.dtype());
    if (!host.empty())
      RESHARD_CUDA_CHECK(cudaMemcpy(x.input->data(), host.data(), host.size(), cudaMemcpyHostToDevice));
  } else {
    pattern_.fill(x.input->data(), x.in_box, plan.src().global_shape(), plan.dtype(), stream_.get());
  }
}

Index RankRedistribution::target_elements() const {
  Index n = 0;
  for (const Tensor& x : tensors_) n += volume(x.out_box);
  return n;
}

void RankRedistribution::run() { exec_.run(inputs_, outputs_, stream_.handle()); }

void RankRedistribution::wait() { exec_.wait(stream_.handle()); }

void RankRedistribution::poison(int byte) {
  for (size_t t = 0; t < tensors_.size(); ++t) {
    if (tensors_[t].in_place)  // the output is the source: filled again instead
      fill_source(t);
    else if (outputs_[t].bytes)
      RESHARD_CUDA_CHECK(cudaMemsetAsync(outputs_[t].data, byte, outputs_[t].bytes, stream_.get()));
  }
}

Index RankRedistribution::count_wrong() {
  wait();
  Index wrong = 0;
  for (size_t t = 0; t < tensors_.size(); ++t) {
    const Plan& plan = batch_.plan(t);
    const Tensor& x = tensors_[t];
    if (x.partial || plan.converts()) {  // checked on the host: contributions, or the converted pattern
      std::vector<unsigned char> host(outputs_[t].bytes);
      if (!host.empty())
        RESHARD_CUDA_CHECK(cudaMemcpy(host.data(), outputs_[t].data, host.size(), cudaMemcpyDeviceToHost));
      wrong += count_local_mismatches(host.data(), plan.src(), plan.dst(), rank_, plan.dtype(), plan.target_dtype());
    } else {
      wrong += pattern_.count_mismatches(outputs_[t].data, x.out_box, plan.src().global_shape(), plan.dtype(),
                                         stream_.get());
    }
  }
  return wrong;
}

}  // namespace reshard::detail
