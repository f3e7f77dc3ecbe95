// The fused one-sided steps' batches (internal to the CUDA backend): one kernel launch per run that posts and awaits
// the step's flags and copies (fused_kernel.cu) or reduces (fused_reduce_kernel.cu) every region between them.
#pragma once

#include <memory>
#include <vector>

#include "kernels.hpp"
#include "reshard/backend.hpp"

namespace reshard::cuda {

// `sync` holds the step's flag addresses, error word and timeout; the batch adds its own call counter (state).
// `output_dtype` != `dtype`: writes into an output buffer convert (RankProgram::output_dtype).
std::unique_ptr<CopyBatch> make_fused_copies(Device& device, int ordinal, int sm_count,
                                             const std::vector<CopyRegion>& regions, DType dtype, DType output_dtype,
                                             const FusedSync& sync);
std::unique_ptr<CopyBatch> make_fused_reductions(Device& device, int ordinal, int sm_count,
                                                 const std::vector<ReduceRegion>& regions, DType dtype,
                                                 DType output_dtype, const FusedSync& sync);

}  // namespace reshard::cuda
