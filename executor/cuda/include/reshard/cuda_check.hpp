// Checking CUDA and NCCL return codes: every failure becomes reshard::Error(kBackend) naming the call, the file and
// line, and the error string.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include "reshard/error.hpp"

namespace reshard::detail {

[[noreturn]] void throw_cuda(cudaError_t err, const char* call, const char* file, int line);
[[noreturn]] void throw_nccl(ncclResult_t res, ncclComm_t comm, const char* call, const char* file, int line);

}  // namespace reshard::detail

#define RESHARD_CUDA_CHECK(call)                                                                             \
  do {                                                                                                       \
    cudaError_t reshard_err_ = (call);                                                                       \
    if (reshard_err_ != cudaSuccess) ::reshard::detail::throw_cuda(reshard_err_, #call, __FILE__, __LINE__); \
  } while (false)
