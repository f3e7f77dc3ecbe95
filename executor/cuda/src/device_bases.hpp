// The kernels' view of a run's three buffers (internal to the CUDA backend).
#pragma once

#include "kernels.hpp"
#include "reshard/backend.hpp"

namespace reshard::cuda {

inline DeviceBases device_bases(const BufferBases& b) {
  DeviceBases d;
  d.ptr[0] = b.input;
  d.ptr[1] = b.output;
  d.ptr[2] = b.work;
  return d;
}

}  // namespace reshard::cuda
