// cuBLAS, loaded (dlopen) when the first GEMM handle is made rather than linked: linking it would load cuBLAS and
// cuBLASLt (about 700 MB) into every reshard process and cost every command about 0.7 s at startup. The headers are
// the toolkit's; the library must have the same major version (libcublas.so.<CUBLAS_VER_MAJOR>), found on the loader's
// path or in the toolkit directory this reshard was built against (RESHARD_CUBLAS_DIR).
#pragma once

#include <cublas_v2.h>

namespace reshard::detail {

struct CublasApi {
  // cublasGemmEx's C signature (C++ sees an overload taking 64-bit sizes too).
  using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                    const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                    cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetWorkspace_v2) set_workspace = nullptr;
  GemmEx gemm_ex = nullptr;
  decltype(&cublasGetStatusName) status_name = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
};

// Loads the library once; kInvalidArgument naming it and the loader's reason when it cannot be loaded.
const CublasApi& cublas_api();

// kBackend naming the call, the file and line, and cuBLAS's status, unless `status` is CUBLAS_STATUS_SUCCESS.
void check_cublas(cublasStatus_t status, const char* call, const char* file, int line);

}  // namespace reshard::detail

#define RESHARD_CUBLAS_CHECK(call) ::reshard::detail::check_cublas((call), #call, __FILE__, __LINE__)
