// Builds without CUDA, NCCL or cuBLAS: the contention measurement is never available.
#include "reshard/gemm_contention.hpp"

namespace reshard {

std::vector<ContentionResult> run_contention(const std::vector<Plan>& plans, const ContentionOptions& options) {
  check_contention_options(options);
  const int n = plans.empty() ? 0 : plans.front().src().mesh().world_size();
  fail(ErrorKind::kInvalidArgument, cat("measuring a redistribution beside GEMMs needs ", n,
                                        " GPUs and this reshard was built without CUDA, NCCL or cuBLAS"));
}

}  // namespace reshard
