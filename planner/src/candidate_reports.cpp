#include "candidate_reports.hpp"

#include <algorithm>
#include <utility>

#include "plan_recompute.hpp"

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

namespace {

class PendingReports final : public PendingCandidates {
 public:
  PendingReports(std::vector<Candidate> candidates, std::vector<DeferredRoute> routes, const Layout& base,
                 const CostModel& model, DType dtype, Index chunk_bytes, Fusion fusion)
      : PendingCandidates(std::move(candidates)),
        routes_(std::move(routes)),
        base_(base),
        model_(model),
        dtype_(dtype),
        chunk_bytes_(chunk_bytes),
        fusion_(fusion) {}

 private:
  void complete(std::vector<Candidate>& candidates) override {
    LayoutCache cache(base_, model_.topology(), reshard::element_size(dtype_));
    const StepPricer pricer(model_, dtype_, chunk_bytes_, fusion_);
    WorkspacePeak peak;
    for (const DeferredRoute& r : routes_) {
      Candidate& c = candidates.at(static_cast<size_t>(r.candidate));
      c.peak_workspace_bytes = peak(r.steps, base_.mesh().size(), pricer, cache);
      c.route = route_text(r.steps.size(), [&](size_t i) -> const Step& { return r.steps[i].step; });
    }
    std::vector<DeferredRoute>().swap(routes_);  // done: their memory goes back
  }

  std::vector<DeferredRoute> routes_;
  Layout base_;
  CostModel model_;
  DType dtype_;
  Index chunk_bytes_;
  Fusion fusion_;
};

}  // namespace

std::shared_ptr<PendingCandidates> pending_reports(std::vector<Candidate> candidates, std::vector<DeferredRoute> routes,
                                                   const Layout& base, const CostModel& model, DType dtype,
                                                   Index chunk_bytes, Fusion fusion) {
  return std::make_shared<PendingReports>(std::move(candidates), std::move(routes), base, model, dtype, chunk_bytes,
                                          fusion);
}

}  // namespace reshard::detail
