#include "nccl_rank.hpp"

#include <vector>

#include "reshard/cuda_check.hpp"
#include "reshard/pattern.hpp"

namespace reshard::detail {

RankRedistribution::RankRedistribution(const Plan& plan, Communicator& comm, CudaDevice& device,
                                       const ExecutorOptions& options)
    : plan_(plan),
      rank_(comm.rank()),
      partial_(plan.src().has_partial() || plan.dst().has_partial()),
      in_box_(plan.src().box(rank_)),
      out_box_(plan.dst().box(rank_)),
      stream_(device.ordinal()),
      pattern_(device),
      exec_(plan, comm, device, options),
      input_(device.allocate(exec_.input_bytes())),
      output_(device.allocate(exec_.output_bytes())) {
  if (partial_) {
    std::vector<unsigned char> host(input_->bytes());
    fill_local(host.data(), plan.src(), rank_, plan.dtype());
    if (!host.empty()) RESHARD_CUDA_CHECK(cudaMemcpy(input_->data(), host.data(), host.size(), cudaMemcpyHostToDevice));
  } else {
    pattern_.fill(input_->data(), in_box_, plan.src().global_shape(), plan.dtype(), stream_.get());
  }
}

void RankRedistribution::run() {
  exec_.run({input_->data(), input_->bytes()}, {output_->data(), output_->bytes()}, stream_.handle());
}

void RankRedistribution::wait() { exec_.wait(stream_.handle()); }

void RankRedistribution::poison(int byte) {
  if (output_->bytes()) RESHARD_CUDA_CHECK(cudaMemsetAsync(output_->data(), byte, output_->bytes(), stream_.get()));
}

Index RankRedistribution::count_wrong() {
  wait();
  if (partial_) {
    std::vector<unsigned char> host(output_->bytes());
    if (!host.empty())
      RESHARD_CUDA_CHECK(cudaMemcpy(host.data(), output_->data(), host.size(), cudaMemcpyDeviceToHost));
    return count_local_mismatches(host.data(), plan_.src(), plan_.dst(), rank_, plan_.dtype());
  }
  return pattern_.count_mismatches(output_->data(), out_box_, plan_.src().global_shape(), plan_.dtype(), stream_.get());
}

}  // namespace reshard::detail
