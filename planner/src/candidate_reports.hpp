// What a candidate reports beyond its price: its peak workspace per rank and its route (internal to the planner).
// The planner computes them at once for the candidate it keeps and, where ranking needs them (a memory budget), for
// every candidate; otherwise it leaves the others' to the plan's first read of its candidates (pending_reports).
#pragma once

#include <memory>
#include <vector>

#include "layout_cache.hpp"
#include "pending_candidates.hpp"
#include "step_pricing.hpp"

namespace reshard::detail {

// Peak workspace per rank, in bytes, of a chain of priced steps between `cache`'s layouts (of `ranks` ranks), laid out
// as the lowering lays it out (step_geometry.hpp's WorkspaceLayout: the intermediate tensors and the largest step's
// scratch, the largest over ranks). Collective steps' scratch comes from the cache (computed once per planning and
// pipeline chunk); p2p steps carry theirs. Keeps its buffers from call to call (no allocation per candidate).
class WorkspacePeak {
 public:
  Index operator()(const std::vector<PricedStep>& steps, int ranks, const StepPricer& pricer, LayoutCache& cache);

 private:
  std::vector<const std::vector<Index>*> scratch_of_;  // every step's scratch per rank
  std::vector<const RankBoxes*> after_;                // the layout after every step but the last
  std::vector<Index> intermediate_;                    // one rank's intermediate tensors
};

// A candidate whose report waits: its index among the plan's candidates and its priced steps (with the scratch of its
// p2p steps).
struct DeferredRoute {
  int candidate = 0;
  std::vector<PricedStep> steps;
};

// `candidates` with the peak workspace and route of every deferred route's candidate filled in on first use, computed
// as the planner computes them: on a LayoutCache of `base`'s mesh and shape (built then), with a pricer of `model`,
// `dtype`, `chunk_bytes` and `fusion`, the steps' scratch where they carry it. Their budget fit is left as it is (no
// budget: they fit).
std::shared_ptr<PendingCandidates> pending_reports(std::vector<Candidate> candidates, std::vector<DeferredRoute> routes,
                                                   const Layout& base, const CostModel& model, DType dtype,
                                                   Index chunk_bytes, Fusion fusion);

}  // namespace reshard::detail
