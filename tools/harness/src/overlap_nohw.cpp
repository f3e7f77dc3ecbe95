// Builds without CUDA, NCCL or cuBLAS: the overlap measurement is never available.
#include "reshard/gemm_overlap.hpp"

namespace reshard {

std::vector<OverlapResult> run_overlap(const std::vector<Plan>& plans, const OverlapOptions& options) {
  check_overlap_options(options);
  const int n = plans.empty() ? 0 : plans.front().src().mesh().world_size();
  fail(ErrorKind::kInvalidArgument, cat("measuring a redistribution beside GEMMs needs ", n,
                                        " GPUs and this reshard was built without CUDA, NCCL or cuBLAS"));
}

}  // namespace reshard
