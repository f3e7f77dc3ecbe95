#include "plan/pending_candidates.hpp"

namespace reshard {

const std::vector<Candidate>& Plan::candidates() const { return pending_ ? pending_->candidates() : s_.candidates; }

PlanSpec Plan::spec() const {
  PlanSpec spec = s_;
  if (pending_) spec.candidates = pending_->candidates();
  return spec;
}

}  // namespace reshard
