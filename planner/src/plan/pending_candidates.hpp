// A plan's candidates some of whose figures are computed on first use (internal to the planner).
//
// Ranking candidates needs only to know which is cheapest (and, under a memory budget, their peak workspace): what only
// reports read (a losing candidate's peak workspace and route, the price of one a search showed costs more than a
// cheaper one) can wait until Plan::candidates() is first called, which a runtime that only executes plans never does.
// The planner's implementation (planner.cpp) plans those candidates again in full then.
#pragma once

#include <mutex>
#include <utility>
#include <vector>

#include "reshard/plan.hpp"

namespace reshard::detail {

class PendingCandidates {
 public:
  explicit PendingCandidates(std::vector<Candidate> candidates) : candidates_(std::move(candidates)) {}
  PendingCandidates(const PendingCandidates&) = delete;
  PendingCandidates& operator=(const PendingCandidates&) = delete;
  virtual ~PendingCandidates() = default;

  // The candidates, completed by the first call (once, thread-safe; a call that throws leaves them to the next).
  const std::vector<Candidate>& candidates() {
    std::call_once(once_, [this] { complete(candidates_); });
    return candidates_;
  }

 protected:
  // Fills in the figures left out; called at most once (again only if it threw).
  virtual void complete(std::vector<Candidate>& candidates) = 0;

 private:
  std::once_flag once_;
  std::vector<Candidate> candidates_;
};

}  // namespace reshard::detail
