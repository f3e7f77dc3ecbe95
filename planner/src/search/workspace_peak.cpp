#include "search/workspace_peak.hpp"

#include <algorithm>

namespace reshard::detail {

Index WorkspacePeak::operator()(const std::vector<PricedStep>& steps, int ranks, const StepPricer& pricer,
                                LayoutCache& cache) {
  const int es = pricer.element_size();
  scratch_of_.clear();
  for (const PricedStep& ps : steps)  // p2p steps carry theirs
    scratch_of_.push_back(ps.scratch.empty() ? &cache.collective_scratch(ps.step.from, ps.step.to, ps.step.kind,
                                                                         ps.step.mesh_dims, pricer)
                                             : &ps.scratch);
  after_.clear();
  for (size_t i = 0; i + 1 < steps.size(); ++i) after_.push_back(&cache.boxes(steps[i].step.to));
  intermediate_.assign(after_.size(), 0);
  Index peak = 0;
  for (int r = 0; r < ranks; ++r) {
    Index scratch = 0;
    for (const std::vector<Index>* s : scratch_of_) scratch = std::max(scratch, (*s)[r]);
    for (size_t i = 0; i < after_.size(); ++i) intermediate_[i] = after_[i]->volume(r);
    peak = std::max(peak, WorkspaceLayout(intermediate_, es).total(scratch));
  }
  return checked_mul(peak, es, "the plan's peak workspace in bytes");
}

}  // namespace reshard::detail
