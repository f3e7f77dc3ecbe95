// The few CUDA driver functions the backend needs (stream memory operations, allocation ranges), resolved at run time
// through the runtime's entry-point query, so nothing links libcuda directly (binaries still load on machines without
// a driver, where the GPU code never runs).
#pragma once

#include <cuda.h>

namespace reshard::cuda {

struct DriverApi {
  CUresult (*stream_batch_mem_op)(CUstream, unsigned int, CUstreamBatchMemOpParams*, unsigned int) = nullptr;
  CUresult (*mem_get_address_range)(CUdeviceptr*, size_t*, CUdeviceptr) = nullptr;
  CUresult (*pointer_get_attributes)(unsigned int, CUpointer_attribute*, void**, CUdeviceptr) = nullptr;
  CUresult (*get_error_string)(CUresult, const char**) = nullptr;
};

// Resolved once (thread-safe); kBackend naming the function when the driver lacks one.
const DriverApi& driver_api();

// Throws kBackend naming the call when `result` is not CUDA_SUCCESS.
void check_driver(CUresult result, const char* call, const char* file, int line);

}  // namespace reshard::cuda

#define RESHARD_CU_CHECK(call) ::reshard::cuda::check_driver((call), #call, __FILE__, __LINE__)
