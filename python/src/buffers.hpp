// Tensors from Python as data pointers, without linking any framework: a DLPack capsule (`__dlpack__`, the DLPack 0.x
// "dltensor" protocol), `__cuda_array_interface__` (version 2 or 3), or a raw address (an int, trusted, size
// unchecked). The tensor must be dense row-major; its bytes are counted from shape and element size.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace reshard::python {

enum class MemoryKind { kUnknown, kHost, kCuda };

struct BufferRef {
  void* data = nullptr;
  std::optional<size_t> bytes;  // unset for a raw address
  MemoryKind memory = MemoryKind::kUnknown;
  int device = 0;        // CUDA ordinal for kCuda
  int element_bits = 0;  // 0 for a raw address
  bool readonly = false;
  pybind11::object keepalive;  // holds the DLPack capsule until the buffer is no longer used
};

// Reads a buffer. For CUDA DLPack producers `stream` (a cudaStream_t as an integer, 0 for the legacy default stream)
// is the consumer stream handed to `__dlpack__`, so that the producer orders its pending work before it. `what`
// names the argument in errors (ValueError: not a tensor, not contiguous, wrong device).
BufferRef buffer_from(pybind11::handle obj, std::uintptr_t stream, const char* what);

// Whether this build reads DLPack capsules (dlpack/dlpack.h was found).
bool dlpack_supported();

// Checks that a buffer holds at least `bytes` bytes on the expected memory (kInvalidArgument naming `what`).
void check_buffer_size(const BufferRef& buf, size_t bytes, MemoryKind memory, const char* what);

}  // namespace reshard::python
