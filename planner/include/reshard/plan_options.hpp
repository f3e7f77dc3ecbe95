// The settings of one planning request (make_plan, make_rank_plan, plan batches and the plan cache): which
// strategies and transports to consider, the machine (topology and cost-model profile) and the limits they must meet.
#pragma once

#include <optional>

#include "reshard/plan.hpp"
#include "reshard/profile.hpp"

namespace reshard {

struct PlanOptions {
  Strategy strategy = Strategy::kAuto;
  // nccl or nvlink for every communicating step that can take it; auto prices both per candidate. nvlink is
  // offered only where Topology::peer_access holds and never across nodes.
  Transport transport = Transport::kAuto;
  // nvlink p2p steps fused into one kernel per rank per call: by cost (auto), always where possible, or never.
  Fusion fusion = Fusion::kAuto;
  // p2p steps on nccl across nodes relay (Step::relayed): by cost (auto), wherever something is relayed, or never.
  Relay relay = Relay::kAuto;
  Topology topology{};
  Profile profile = default_profile();
  std::optional<Index> memory_budget_bytes;  // per rank; unset: no limit
  std::optional<int> max_collectives;        // cap on the collective strategy's communication steps; unset: none
  // p2p transfers that need packing are pipelined in chunks of this many bytes; 0 (the default) runs them whole:
  // pipelining in 16 or 64 MiB chunks measured slower than one pass (docs/benchmarks.md).
  Index pipeline_chunk_bytes = 0;
  // The caller means to run compute beside the redistribution (low-SM mode): work done by SM kernels (NCCL's
  // collectives and exchanges, pack/unpack/local copy kernels, nvlink kernel pulls and fused kernels) is priced at
  // Profile::low_sm_kernel_factor times its time alone, copy-engine work and stream-memory waits as alone; so auto
  // prefers the copy engines under compute even where a kernel is faster alone.
  bool low_sm = false;
  // The caller hands different tensors on every call (a caching allocator's, as reshard.torch does). A one-sided
  // (nvlink) step that reads the caller's source tensor must then map the peers' tensors on every call (host work,
  // Profile::nvlink.map_us), or be staged: every sending rank first copies its source tensor into its workspace, where
  // the peers read it (one local copy and that much more workspace; Step::staged). The planner prices both and keeps
  // the cheaper; steps on nccl and steps reading intermediate tensors are unaffected.
  bool buffers_change = false;
};

}  // namespace reshard
