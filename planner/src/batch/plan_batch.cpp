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
    const Plan& first = *plans_.front();
    if (p.converts() || first.converts())
      RESHARD_REQUIRE(p.dtype() == first.dtype() && p.target_dtype() == first.target_dtype(), "tensor ", i,
                      " of the batch moves ", to_string(p.dtype()), " to ", to_string(p.target_dtype()), ", tensor 0 ",
                      to_string(first.dtype()), " to ", to_string(first.target_dtype()),
                      ": a batch converts only when every member converts the same pair (one batch per pair)");
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
      const PlanRequest req{e.src, e.dst, e.dtype, e.to_dtype.value_or(e.dtype), o};
      plans.push_back(std::make_shared<const Plan>(plan_request(req, rank)));
    } catch (const Error& err) {
      throw Error(err.kind(), cat("tensor ", i, " of the batch: ", err.what()));
    }
  }
  return plans;
}

}  // namespace

PlanBatch make_plan_batch(std::span<const BatchEntry> entries, const PlanOptions& options, std::optional<int> rank) {
  RESHARD_REQUIRE(!entries.empty(), "a plan batch needs at least one tensor");
  RESHARD_REQUIRE(entries.size() <= kMaxBatchTensors, "a plan batch of ", entries.size(), " tensors; at most ",
                  kMaxBatchTensors);
  // Members are planned as they would be alone, mapping priced per member included: on a caller's fresh tensors
  // every member's source is an allocation of its own, which each reading peer opens (Profile::nvlink.map_us).
  Plans plans = plan_each(entries, options, rank);
  if (!options.buffers_change || options.transport != Transport::kAuto) return PlanBatch(std::move(plans));
  // A member that would stage its source runs on NCCL instead: a batch step stages every member's source before any
  // peer reads one (one ready for all members), where NCCL's exchanges read the sources in place.
  PlanOptions nccl = options;
  nccl.transport = Transport::kNccl;
  for (size_t i = 0; i < plans.size(); ++i) {
    const std::vector<Step>& steps = plans[i]->steps();
    if (steps.empty() || !steps[0].staged) continue;
    plans[i] = plan_each(entries.subspan(i, 1), nccl, rank).front();
  }
  return PlanBatch(std::move(plans));
}

}  // namespace reshard
