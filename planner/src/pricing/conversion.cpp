#include "pricing/conversion.hpp"

#include <algorithm>

#include "pricing/chunking.hpp"
#include "reshard/rank_boxes.hpp"

namespace reshard::detail {

double conversion_us(const CostModel& model, const Layout& dst, DType dtype, DType to_dtype) {
  if (dtype == to_dtype) return 0;
  const Index volume = RankBoxes(dst).max_volume();
  const int es = std::max(element_size(dtype), element_size(to_dtype));
  return model.copy_us(checked_mul(volume, es, "the converted target's bytes"));
}

Index conversion_staging_bytes(const Layout& dst, DType dtype) {
  const int es = element_size(dtype);
  return checked_mul(aligned_elements(RankBoxes(dst).max_volume(), es), es, "conversion staging bytes");
}

void price_conversion(PlanSpec& spec, const CostModel& model) {
  if (!spec.to_dtype || spec.steps.empty()) return;
  const double us = conversion_us(model, spec.dst, spec.dtype, *spec.to_dtype);
  const Index staging = conversion_staging_bytes(spec.dst, spec.dtype);
  spec.peak_workspace_bytes = checked_add(spec.peak_workspace_bytes, staging, "the plan's peak workspace");
  spec.steps.back().estimated_us += us;
  // The plan's estimate is the sum of its steps' in order, as a loaded plan's is recomputed (plan_recompute.cpp), and
  // the chosen candidate's is the plan's. Every candidate's workspace takes the staging.
  spec.estimated_us = 0;
  Transport transport = Transport::kNccl;
  for (const Step& s : spec.steps) {
    spec.estimated_us += s.estimated_us;
    if (s.transport == Transport::kNvlink) transport = Transport::kNvlink;
  }
  for (Candidate& c : spec.candidates) {
    if (!c.available) continue;
    c.estimated_us = c.strategy == spec.strategy && c.transport == transport ? spec.estimated_us : c.estimated_us + us;
    c.peak_workspace_bytes = checked_add(c.peak_workspace_bytes, staging, "a candidate's peak workspace");
    c.fits_budget = !spec.memory_budget_bytes || c.peak_workspace_bytes <= *spec.memory_budget_bytes;
  }
}

}  // namespace reshard::detail
