#include "reshard/sweep_estimate.hpp"

#include <algorithm>
#include <optional>
#include <set>

namespace reshard {
namespace {

bool moves_data(const SweepCase& c) { return c.between || c.from != c.to; }

// Runs of a case: one per strategy, and a CUDA-graph replay of auto's choice where the sweep measures one.
size_t case_runs(const SweepCase& c, const SweepOptions& o) {
  const bool graph = o.backend == Backend::kNccl && case_bytes(c) <= o.graph_max_bytes &&
                     std::find(c.runs.begin(), c.runs.end(), c.auto_choice) != c.runs.end();
  return c.runs.size() + (graph ? 1 : 0);
}

}  // namespace

RunCost fit_run_cost(Index small_bytes, double small_s, Index large_bytes, double large_s) {
  if (large_bytes == small_bytes) return RunCost{(small_s + large_s) / 2, 0};
  if (large_bytes < small_bytes) return fit_run_cost(large_bytes, large_s, small_bytes, small_s);
  if (large_s <= small_s) return RunCost{small_s, 0};
  const double per_byte = (large_s - small_s) / static_cast<double>(large_bytes - small_bytes);
  const double fixed = small_s - per_byte * static_cast<double>(small_bytes);
  return fixed >= 0 ? RunCost{fixed, per_byte} : RunCost{0, large_s / static_cast<double>(large_bytes)};
}

Index case_bytes(const SweepCase& c) {
  Index n = 1;
  for (Index e : c.shape) n *= e;
  return n * element_size(c.dtype);
}

Index probe_bytes(Backend backend) { return backend == Backend::kHost ? Index(4) << 20 : Index(64) << 20; }

std::vector<size_t> probe_cases(const std::vector<SweepCase>& cases, Index max_bytes) {
  std::vector<size_t> out;
  std::optional<size_t> small, large;
  for (size_t i = 0; i < cases.size(); ++i) {
    if (cases[i].runs.empty()) continue;
    const Index b = case_bytes(cases[i]);
    const bool moving = moves_data(cases[i]);
    if (!small || (moving && !moves_data(cases[*small])) ||
        (moving == moves_data(cases[*small]) && b < case_bytes(cases[*small])))
      small = i;
    if (moving && b <= max_bytes && (!large || b > case_bytes(cases[*large]))) large = i;
  }
  if (small) out.push_back(*small);
  if (large && large != small && case_bytes(cases[*large]) > case_bytes(cases[*small])) out.push_back(*large);
  return out;
}

double estimate_sweep_seconds(const std::vector<SweepCase>& cases, const SweepOptions& o, const RunCost& cost) {
  double total = 0;
  for (const SweepCase& c : cases) total += static_cast<double>(case_runs(c, o)) * cost.seconds(case_bytes(c));
  return total;
}

std::vector<SweepCase> fit_to_budget(std::vector<SweepCase> cases, const SweepOptions& o, const RunCost& cost,
                                     double budget_s) {
  std::set<Index> sizes;
  for (const SweepCase& c : cases) sizes.insert(case_bytes(c));
  if (sizes.empty()) return cases;
  Index keep = *sizes.begin();
  double total = 0;
  for (Index size : sizes) {
    for (const SweepCase& c : cases)
      if (case_bytes(c) == size) total += static_cast<double>(case_runs(c, o)) * cost.seconds(size);
    if (total > budget_s && size != *sizes.begin()) break;
    keep = size;
  }
  std::erase_if(cases, [&](const SweepCase& c) { return case_bytes(c) > keep; });
  return cases;
}

}  // namespace reshard
