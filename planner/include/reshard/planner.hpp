// The planner: candidate plans for a redistribution, priced by the cost model; the cheapest wins.
//
//   reshard::PlanOptions options;                 // strategy auto, default profile, 8 ranks per node
//   reshard::Plan plan = reshard::make_plan(src, dst, reshard::DType::kBF16, options);
//   std::cout << reshard::plan_table(plan);
//
// Candidates: collective (shortest path over single collectives), p2p (one step of concurrent transfers moving
// the minimum bytes), hybrid (collectives where one serves a mesh dim, one p2p step for the rest). Auto takes
// the cheapest candidate whose peak workspace fits the memory budget. The planner never touches a GPU.
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

// The global plan: p2p steps list every rank's transfers (for inspection, JSON and SVG).
// kInvalidArgument when the layouts differ in mesh or shape, the strategy has no candidate for this
// redistribution, or no candidate fits the memory budget.
Plan make_plan(const Layout& src, const Layout& dst, DType dtype, const PlanOptions& options = {});

// The same plan as one rank needs it: same strategy, steps and prices, but p2p steps hold only the transfers
// this rank sends or receives. Pricing visits every transfer once (each source rank's, enumerated directly);
// nothing quadratic is stored.
Plan make_rank_plan(const Layout& src, const Layout& dst, DType dtype, int rank, const PlanOptions& options = {});

}  // namespace reshard
