// What a run will need, computed from the plan before anything is allocated, and the refusal when it does not fit.
//
// Host backend (every rank a thread of this process): every rank's source and target tensors, its workspace (the
// plan's peak, the largest rank's, counted for every rank), and the largest step's messages in flight (the host
// transport copies each message into a mailbox; collectives also stage a gather of the group). Verification
// computes expected values on the fly and needs no reference copy.
// NCCL backend: per GPU, its rank's source and target tensors and workspace, against cudaMemGetInfo's free figure
// (NCCL's own buffers are not counted); on the host, Partial layouts stage every local rank's source and target for
// the host-side pattern.
//
// Available host memory: MemAvailable + SwapFree from /proc/meminfo (on some machines MemTotal starts small and
// grows, so MemAvailable plus free swap is the honest figure), capped by the cgroup's limit minus its usage (cgroup v2
// memory.max, or v1 memory.limit_in_bytes). RESHARD_MEMORY_LIMIT_BYTES (bytes; suffixes KiB, MiB, GiB) caps both
// the host and every GPU's figure, so the refusal can be tested on any machine.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "reshard/harness.hpp"

namespace reshard {

struct MemoryNeed {
  Index host_bytes = 0;                    // this process
  Index device_bytes = 0;                  // per GPU: the largest rank's (NCCL backend)
  std::string host_detail, device_detail;  // "sources 1.0 GiB + targets 1.0 GiB + ..."
};

// Needs of running `plan` on `backend` in this process: all the mesh's ranks, or only `rank` (one process per rank);
// on GPUs every source and target `buffer_sets` times (RunOptions::buffers).
MemoryNeed memory_need(const Plan& plan, Backend backend, std::optional<int> rank = std::nullopt, int buffer_sets = 1);
// A batch's: its plans' needs summed, plus every plan's workspace once more (the batch's staging area, which holds at
// most what the plans stage).
MemoryNeed memory_need(const PlanBatch& batch, Backend backend, std::optional<int> rank = std::nullopt,
                       int buffer_sets = 1);

// Host memory available to this process (bytes; see above), and RESHARD_MEMORY_LIMIT_BYTES when set (nullopt when not;
// kInvalidArgument when it is not a byte count).
Index available_host_memory();
std::optional<Index> injected_memory_limit();

// Free memory of a GPU (cudaMemGetInfo), capped by RESHARD_MEMORY_LIMIT_BYTES.
Index available_device_memory(int device);

// kInvalidArgument naming the figures when the need exceeds what is available: host, then each GPU in `devices`.
void check_memory(const MemoryNeed& need, Backend backend, const std::vector<int>& devices);

}  // namespace reshard
