// The standalone probes' error checks: every CUDA and cuBLAS call checked, the failing call named, exit 1.
#pragma once

#include <cstdio>
#include <cstdlib>

#define CHECK(x)                                                                               \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

// For probes that include cublas_v2.h first.
#define CHECK_BLAS(x)                                                             \
  do {                                                                            \
    cublasStatus_t s_ = (x);                                                      \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                            \
      std::fprintf(stderr, "%s:%d: %s: status %d\n", __FILE__, __LINE__, #x, s_); \
      std::exit(1);                                                               \
    }                                                                             \
  } while (0)

// Argument i of a probe's command line as a whole number in [lo, hi] (`fallback` when absent), else a one-line error
// naming the probe and the argument, exit 2.
inline long long probe_arg(int argc, char** argv, int i, long long fallback, long long lo, long long hi,
                           const char* what) {
  if (argc <= i) return fallback;
  char* end = nullptr;
  const long long v = std::strtoll(argv[i], &end, 10);
  if (end == argv[i] || *end != '\0' || v < lo || v > hi) {
    std::fprintf(stderr, "%s: %s must be %lld to %lld, got '%s'\n", argv[0], what, lo, hi, argv[i]);
    std::exit(2);
  }
  return v;
}
