// reshard's umbrella header: the whole public API a sharding runtime uses, in one include.
//
//   core        error.hpp (reshard::Error), dims.hpp, version.hpp
//   layouts     mesh.hpp, topology.hpp, placement.hpp, dtype.hpp, box.hpp, layout.hpp
//   planner     planner.hpp (make_plan), plan.hpp, plan_json.hpp, plan_format.hpp, profile.hpp
//   executor    executor.hpp, backend.hpp (Communicator, Device), host_backend.hpp (ranks as threads)
//   test data   pattern.hpp (the deterministic test tensor and mismatch counting)
//   CUDA/NCCL   cuda_device.hpp, nccl_communicator.hpp, cuda_pattern.hpp: only where the target links reshard::cuda
//               (which defines RESHARD_HAVE_CUDA), as they include cuda_runtime.h and nccl.h.
//
// Link reshard::reshard (CMake) or `pkg-config --cflags --libs reshard`. A planner-only consumer (no CUDA, no
// executor) includes reshard/planner.hpp and links reshard::planner instead.
#pragma once

#include "reshard/backend.hpp"
#include "reshard/box.hpp"
#include "reshard/dims.hpp"
#include "reshard/dtype.hpp"
#include "reshard/error.hpp"
#include "reshard/executor.hpp"
#include "reshard/host_backend.hpp"
#include "reshard/layout.hpp"
#include "reshard/mesh.hpp"
#include "reshard/pattern.hpp"
#include "reshard/placement.hpp"
#include "reshard/plan.hpp"
#include "reshard/plan_cache.hpp"
#include "reshard/plan_format.hpp"
#include "reshard/plan_json.hpp"
#include "reshard/planner.hpp"
#include "reshard/profile.hpp"
#include "reshard/topology.hpp"
#include "reshard/version.hpp"

#if defined(RESHARD_HAVE_CUDA)
#include "reshard/cuda_device.hpp"
#include "reshard/cuda_pattern.hpp"
#include "reshard/nccl_communicator.hpp"
#endif
