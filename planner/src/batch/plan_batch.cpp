// PlanBatch: validating and planning a list of tensors (the lowering is lowering_batch.cpp).
#include "reshard/plan_batch.hpp"

#include <algorithm>

#include "reshard/error.hpp"

namespace reshard {

PlanBatch::PlanBatch(std::vector<std::shared_ptr<const Plan>> plans) : plans_(std::move(plans)) {
  RESHARD_REQUIRE(!plans_.empty(), "a plan batch needs at least one tensor");
  RESHARD_REQUIRE(plans_.size() <= kMaxBatchTensors, "a plan batch of ", plans_.size(), " tensors; at most ",
                  kMaxBatchTensors);
  for (size_t i = 0; i < plans_.size(); ++i) {
    RESHARD_REQUIRE(plans_[i] != nullptr, "tensor ", i, " of the batch has no plan");
    const Plan& p = *plans_[i];
    RESHARD_REQUIRE(p.src().mesh() == mesh(), "tensor ", i, " of the batch is on mesh ", p.src().mesh().str(),
                    ", tensor 0 on ", mesh().str(), ": a batch runs on one mesh");
    RESHARD_REQUIRE(p.scope_rank() == plans_.front()->scope_rank(), "tensor ", i,
                    " of the batch is planned for another scope (global or one rank's) than tensor 0");
  }
}

PlanBatch PlanBatch::of(const Plan& plan) {
  return PlanBatch({std::shared_ptr<const Plan>(&plan, [](const Plan*) {})});
}

int PlanBatch::step_count() const {
  size_t n = 0;
  for (const auto& p : plans_) n = std::max(n, p->steps().size());
  return static_cast<int>(n);
}

double PlanBatch::estimated_us() const {
  double t = 0;
  for (const auto& p : plans_) t += p->estimated_us();
  return t;
}

Index PlanBatch::bytes_moved() const {
  Index n = 0;
  for (const auto& p : plans_) n = checked_add(n, p->bytes_moved(), "a batch's bytes moved");
  return n;
}

namespace {

using Plans = std::vector<std::shared_ptr<const Plan>>;

Plans plan_each(std::span<const BatchEntry> entries, const PlanOptions& o, std::optional<int> rank) {
  Plans plans;
  plans.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    const BatchEntry& e = entries[i];
    try {
      plans.push_back(std::make_shared<const Plan>(rank ? make_rank_plan(e.src, e.dst, e.dtype, *rank, o)
                                                        : make_plan(e.src, e.dst, e.dtype, o)));
    } catch (const Error& err) {
      throw Error(err.kind(), cat("tensor ", i, " of the batch: ", err.what()));
    }
  }
  return plans;
}

// Whether a plan's one-sided steps read the caller's tensors in the peers (its first step on nvlink, not staged):
// with changing buffers, a run maps them.
bool maps_callers_tensors(const Plan& plan) {
  const std::vector<Step>& steps = plan.steps();
  return !steps.empty() && steps[0].transport == Transport::kNvlink && !steps[0].staged;
}

// What the batch costs per call: every member's estimate with its mapping (`member_map_us` where it maps) taken out,
// and one mapping for the whole batch where any member maps.
double batch_cost(const Plans& plans, double member_map_us, double map_us) {
  double t = 0;
  bool maps = false;
  for (const auto& p : plans) {
    const bool m = maps_callers_tensors(*p);
    t += p->estimated_us() - (m ? member_map_us : 0.0);
    maps = maps || m;
  }
  return t + (maps ? map_us : 0.0);
}

}  // namespace

PlanBatch make_plan_batch(std::span<const BatchEntry> entries, const PlanOptions& options, std::optional<int> rank) {
  RESHARD_REQUIRE(!entries.empty(), "a plan batch needs at least one tensor");
  RESHARD_REQUIRE(entries.size() <= kMaxBatchTensors, "a plan batch of ", entries.size(), " tensors; at most ",
                  kMaxBatchTensors);
  Plans alone = plan_each(entries, options, rank);
  if (entries.size() == 1 || !options.buffers_change || options.transport != Transport::kAuto)
    return PlanBatch(std::move(alone));
  // A batch run on new buffers maps the peers' tensors once for all its members (one exposure per run), so the
  // mapping is priced once per batch: the members planned with mapping free, plus one Profile::nvlink.map_us, against
  // the members as planned alone (each priced with its own mapping or staging); the cheaper set runs.
  const double map_us = options.profile.nvlink.map_us;
  PlanOptions shared = options;
  shared.profile.nvlink.map_us = 0;
  Plans together = plan_each(entries, shared, rank);
  return PlanBatch(batch_cost(together, 0, map_us) < batch_cost(alone, map_us, map_us) ? std::move(together)
                                                                                       : std::move(alone));
}

}  // namespace reshard
