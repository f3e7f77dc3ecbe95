#include "driver_api.hpp"

#include <cuda_runtime.h>

#include "reshard/error.hpp"

namespace reshard::cuda {
namespace {

template <class F>
void resolve(const char* symbol, F& fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult status{};
  cudaError_t err = cudaGetDriverEntryPointByVersion(symbol, &p, 12000, cudaEnableDefault, &status);
  if (err != cudaSuccess || status != cudaDriverEntryPointSuccess || p == nullptr) {
    cudaGetLastError();
    fail(ErrorKind::kBackend, cat("the CUDA driver has no ", symbol, " (", cudaGetErrorString(err),
                                  "); the nvlink transport needs a driver for CUDA 12 or newer"));
  }
  fn = reinterpret_cast<F>(p);
}

DriverApi load() {
  DriverApi api;
  resolve("cuStreamBatchMemOp", api.stream_batch_mem_op);
  resolve("cuMemGetAddressRange", api.mem_get_address_range);
  resolve("cuPointerGetAttributes", api.pointer_get_attributes);
  resolve("cuGetErrorString", api.get_error_string);
  return api;
}

}  // namespace

const DriverApi& driver_api() {
  static const DriverApi api = load();
  return api;
}

void check_driver(CUresult result, const char* call, const char* file, int line) {
  if (result == CUDA_SUCCESS) return;
  const char* text = nullptr;
  if (driver_api().get_error_string) driver_api().get_error_string(result, &text);
  fail(ErrorKind::kBackend, cat(file, ":", line, ": ", call, " failed: ", text ? text : "unknown driver error", " (",
                                static_cast<int>(result), ")"));
}

}  // namespace reshard::cuda
