#include "cublas_api.hpp"

#include <dlfcn.h>

#include <string>

#include "reshard/error.hpp"

#ifndef RESHARD_CUBLAS_DIR
#define RESHARD_CUBLAS_DIR ""
#endif

namespace reshard::detail {
namespace {

template <class F>
void resolve(void* library, const char* symbol, F& fn) {
  void* p = dlsym(library, symbol);
  if (!p) fail(ErrorKind::kInvalidArgument, cat("cuBLAS has no ", symbol, " (", dlerror(), ")"));
  fn = reinterpret_cast<F>(p);
}

CublasApi load() {
  const std::string name = cat("libcublas.so.", CUBLAS_VER_MAJOR);
  void* library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::string reason = library ? "" : dlerror();
  const std::string dir = RESHARD_CUBLAS_DIR;
  if (!library && !dir.empty()) {
    library = dlopen((dir + "/" + name).c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!library) reason += cat("; ", dlerror());
  }
  if (!library)
    fail(ErrorKind::kInvalidArgument,
         cat("cannot load cuBLAS (", name, ", from CUDA ", CUBLAS_VER_MAJOR, "): ", reason,
             "; GEMMs need the CUDA toolkit's cuBLAS on the loader's path (LD_LIBRARY_PATH)"));
  CublasApi api;  // the library stays loaded until the process ends
  resolve(library, "cublasCreate_v2", api.create);
  resolve(library, "cublasDestroy_v2", api.destroy);
  resolve(library, "cublasSetStream_v2", api.set_stream);
  resolve(library, "cublasSetWorkspace_v2", api.set_workspace);
  resolve(library, "cublasGemmEx", api.gemm_ex);
  resolve(library, "cublasGetStatusName", api.status_name);
  resolve(library, "cublasGetStatusString", api.status_string);
  return api;
}

}  // namespace

const CublasApi& cublas_api() {
  static const CublasApi api = load();
  return api;
}

void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  const CublasApi& api = cublas_api();
  fail(ErrorKind::kBackend,
       cat(file, ":", line, ": ", call, " failed: ", api.status_name(status), " (", api.status_string(status), ")"));
}

}  // namespace reshard::detail
