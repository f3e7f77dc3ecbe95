// budget_groups: a set of tensors cut into consecutive batches that each fit one memory budget (plan_batch.hpp).
#include <algorithm>

#include "reshard/error.hpp"
#include "reshard/plan_batch.hpp"

namespace reshard {
namespace {

// The most workspace (bytes) any rank of the world needs for `batch`, lowered with `options`.
Index peak_workspace(const PlanBatch& batch, const LowerOptions& options) {
  Index peak = 0;
  for (int r = 0; r < batch.mesh().world_size(); ++r) {
    const RankProgram p = lower(batch, r, options);
    peak = std::max(peak, checked_mul(p.work_elements, element_size(p.dtype), "a batch's workspace"));
  }
  return peak;
}

}  // namespace

PlanBatch sub_batch(const PlanBatch& batch, std::span<const size_t> members) {
  std::vector<std::shared_ptr<const Plan>> plans;
  plans.reserve(members.size());
  for (size_t t : members) plans.push_back(batch.plans().at(t));
  return PlanBatch(std::move(plans));
}

std::vector<std::vector<size_t>> budget_groups(const PlanBatch& batch, std::optional<Index> budget,
                                               const LowerOptions& options, std::span<const Index> held) {
  std::vector<std::vector<size_t>> groups;
  const size_t n = batch.size();
  if (!budget) {
    groups.emplace_back(n);
    for (size_t t = 0; t < n; ++t) groups.back()[t] = t;
    return groups;
  }
  RESHARD_REQUIRE(*budget >= 0, "a memory budget must be >= 0 bytes, got ", *budget);
  RESHARD_REQUIRE(held.empty() || held.size() == n, "budget_groups: ", held.size(), " held sizes for ", n, " tensors");
  auto held_by = [&](size_t t) {
    RESHARD_REQUIRE(held.empty() || held[t] >= 0, "budget_groups: tensor ", t, " holds ", held[t], " bytes");
    return held.empty() ? Index{0} : held[t];
  };
  RESHARD_REQUIRE(!batch.plan(0).scope_rank(),
                  "a batch is cut by its memory budget from global plans (every rank must decide the same groups)");
  // Each tensor's own workspace first: a group is grown while the sum of its members' fits (the merged program needs
  // about that, plus the staging of coalesced messages); if its lowering does not fit, the longest prefix that does is
  // found by bisection (a prefix of one always fits: a batch of one is its plan).
  std::vector<Index> alone(n);
  for (size_t t = 0; t < n; ++t) {
    const Index workspace = peak_workspace(PlanBatch::of(batch.plan(t)), options);
    alone[t] = checked_add(workspace, held_by(t), "a tensor's memory");
    RESHARD_REQUIRE(alone[t] <= *budget, "tensor ", t, " needs ", alone[t], " bytes of workspace per rank alone",
                    held_by(t) > 0 ? cat(" (", workspace, " for its plan, ", held_by(t), " held besides)") : "",
                    ", over the memory budget of ", *budget, " for the whole set");
  }
  for (size_t begin = 0; begin < n;) {
    size_t end = begin + 1;
    Index sum = alone[begin];
    while (end < n && sum + alone[end] <= *budget) sum += alone[end++];
    std::vector<size_t> members;
    for (size_t t = begin; t < end; ++t) members.push_back(t);
    auto fits = [&](size_t k) {
      Index need = peak_workspace(sub_batch(batch, std::span(members).first(k)), options);
      for (size_t i = 0; i < k; ++i) need = checked_add(need, held_by(members[i]), "a group's memory");
      return need <= *budget;
    };
    if (members.size() > 1 && !fits(members.size())) {
      size_t lo = 1, hi = members.size();  // fits(lo), !fits(hi)
      while (hi - lo > 1) {
        const size_t mid = lo + (hi - lo) / 2;
        (fits(mid) ? lo : hi) = mid;
      }
      members.resize(lo);
    }
    begin += members.size();
    groups.push_back(std::move(members));
  }
  return groups;
}

}  // namespace reshard
