// A candidate's peak workspace per rank (internal to the planner).
#pragma once

#include <vector>

#include "pricing/step_pricing.hpp"
#include "search/layout_cache.hpp"

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

}  // namespace reshard::detail
