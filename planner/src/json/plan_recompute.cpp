#include "json/plan_recompute.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include "plan/cross_mesh_transfers.hpp"
#include "plan/relays.hpp"
#include "plan/route_text.hpp"
#include "pricing/chunking.hpp"
#include "pricing/conversion.hpp"
#include "pricing/step_pricing.hpp"
#include "reshard/cost_model.hpp"
#include "reshard/overlap.hpp"

namespace reshard::detail {
namespace {

// Every rank's boxes of the layouts a plan passes through (step_layout's chain), computed once per layout.
class BoxCache {
 public:
  explicit BoxCache(const PlanSpec& spec) : spec_(spec) {}
  const RankBoxes& operator()(size_t i) {
    const Layout l = step_layout(spec_.src, spec_.dst, spec_.steps, i);
    const std::string key = l.str();
    auto it = boxes_.find(key);
    if (it == boxes_.end()) it = boxes_.emplace(key, RankBoxes(l)).first;
    return it->second;
  }

 private:
  const PlanSpec& spec_;
  std::map<std::string, RankBoxes> boxes_;
};

std::string transfer_text(const Transfer& t) {
  return cat("rank ", t.src, " -> ", t.dst, " of ", to_string(t.region), t.via >= 0 ? cat(" via rank ", t.via) : "");
}

}  // namespace

void check_planner_transfers(const PlanSpec& spec) {
  const int es = element_size(spec.dtype);
  for (size_t i = 0; i < spec.steps.size(); ++i) {
    const Step& s = spec.steps[i];
    if (s.kind != StepKind::kP2P) continue;
    const Layout from = step_layout(spec.src, spec.dst, spec.steps, i),
                 to = step_layout(spec.src, spec.dst, spec.steps, i + 1);
    std::vector<Transfer> expected = planned_transfers(from, to, spec.topology, es, spec.scope_rank, s.relayed);
    // The planner's own order (as plan_to_json writes them): one comparison each.
    if (s.transfers.size() == expected.size() &&
        std::equal(s.transfers.begin(), s.transfers.end(), expected.begin(), [](const Transfer& x, const Transfer& y) {
          return x.src == y.src && x.dst == y.dst && x.region == y.region && x.via == y.via;
        }))
      continue;
    // Otherwise the planner's transfers sorted by (src, dst), each matched at most once: the file's in its order, by
    // binary search (O(n log n), one flat table), then the first (src, dst) left unmatched is the one missing.
    const auto by_pair = [](const Transfer& x, const Transfer& y) {
      return x.src != y.src ? x.src < y.src : x.dst < y.dst;
    };
    if (!std::is_sorted(expected.begin(), expected.end(), by_pair))
      std::stable_sort(expected.begin(), expected.end(), by_pair);
    std::vector<char> matched(expected.size(), 0);
    for (size_t k = 0; k < s.transfers.size(); ++k) {
      const Transfer& t = s.transfers[k];
      auto [at, end] = std::equal_range(expected.begin(), expected.end(), t, by_pair);
      while (at != end && (matched[at - expected.begin()] || !(at->region == t.region) || at->via != t.via)) ++at;
      RESHARD_REQUIRE(at != end, "step ", i, " (p2p) transfer ", k, " (", transfer_text(t),
                      ") is not one the planner assigns",
                      spec.scope_rank ? cat(" to rank ", *spec.scope_rank) : std::string(),
                      ": another rank sends that region, so the ranks' plans would not match; regenerate the plan");
      matched[at - expected.begin()] = 1;
    }
    const auto missing = std::find(matched.begin(), matched.end(), 0);
    RESHARD_REQUIRE(missing == matched.end(), "step ", i, " (p2p) lacks the transfer ",
                    missing == matched.end() ? std::string() : transfer_text(expected[missing - matched.begin()]),
                    " that the planner assigns; regenerate the plan");
  }
}

void recompute_summary(PlanSpec& spec, const Profile* profile) {
  const int es = element_size(spec.dtype);
  const int n = spec.src.mesh().world_size();
  const CostModel model(profile ? *profile : default_profile(), spec.topology, spec.low_sm);
  StepPricer pricer(model, spec.dtype, spec.pipeline_chunk_bytes);
  pricer.price_changing_buffers(spec.buffers_change);
  // nvlink steps priced as they were planned: fused or separate copies.
  const StepPricer fused_pricer(model, spec.dtype, spec.pipeline_chunk_bytes, Fusion::kAlways);
  const StepPricer separate_pricer(model, spec.dtype, spec.pipeline_chunk_bytes, Fusion::kNever);
  BoxCache boxes(spec);
  // Peak workspace as the lowering lays it out (and the planner prices it): two alternating intermediate tensors and
  // the largest scratch of any step, per rank.
  std::vector<Index> temp[2] = {std::vector<Index>(n, 0), std::vector<Index>(n, 0)};
  std::vector<Index> scratch(n, 0);
  spec.bytes_moved = 0;
  spec.estimated_us = 0;
  for (size_t i = 0; i < spec.steps.size(); ++i) {
    Step& s = spec.steps[i];
    const RankBoxes &a = boxes(i), &b = boxes(i + 1);
    std::vector<Index> step_scratch;
    if (s.kind == StepKind::kP2P) {
      const StepPricer& p = s.transport != Transport::kNvlink ? pricer : s.fused ? fused_pricer : separate_pricer;
      PricedStep priced;
      if (s.relayed || s.mixed || needs_cross_mesh(a.layout(), b.layout())) {
        const std::vector<Transfer> all =
            planned_transfers(a.layout(), b.layout(), spec.topology, es, std::nullopt, s.relayed);
        priced = price_listed_p2p(p, a, b, all, s.transport, partial_roles(a.layout(), b.layout()).contributions > 1,
                                  s.mixed);
      } else {
        priced = p.p2p(OverlapIndex(a.layout(), b.layout(), spec.topology, es), s.transport);
      }
      if (spec.buffers_change && i == 0) {
        p.price_source_reads(priced, a, s.staged);
        // Only a step that moves data reads peers' tensors; staging one that does not would take unpriced workspace.
        RESHARD_REQUIRE(!s.staged || priced.step.staged, "step ", i,
                        " is staged, but it moves no data between ranks; nothing to stage");
      }
      s.bytes_moved = priced.step.bytes_moved;
      if (profile) s.estimated_us = priced.step.estimated_us;
      step_scratch = std::move(priced.scratch);
    } else {
      RESHARD_REQUIRE(!s.hierarchical || s.kind == StepKind::kAllReduce, "step ", i, " is ", to_string(s.kind),
                      ": only an all_reduce runs hierarchically");
      StepPrice price = pricer.collective(a, b, s.kind, s.mesh_dims,
                                          !s.hierarchical ? AllReduceForm::kFlat
                                          : s.mixed       ? AllReduceForm::kHierarchicalOneSided
                                                          : AllReduceForm::kHierarchical);
      s.bytes_moved = price.bytes_moved;
      if (profile) s.estimated_us = price.us;
      step_scratch = pricer.collective_scratch(a, b, s.kind, s.mesh_dims);
    }
    // A conversion's price is the last step's (pricing/conversion.hpp); kept with the step's estimate otherwise.
    if (profile && spec.to_dtype && i + 1 == spec.steps.size())
      s.estimated_us += conversion_us(model, spec.dst, spec.dtype, *spec.to_dtype);
    spec.bytes_moved = checked_add(spec.bytes_moved, s.bytes_moved, "the plan's bytes moved");
    spec.estimated_us += s.estimated_us;
    for (int r = 0; r < n; ++r) {
      scratch[r] = std::max(scratch[r], step_scratch[r]);
      if (i + 1 < spec.steps.size()) temp[i % 2][r] = std::max(temp[i % 2][r], b.volume(r));
    }
  }
  Index peak = 0;
  for (int r = 0; r < n; ++r) {
    const Index elements =
        checked_add(checked_add(aligned_elements(temp[0][r], es), aligned_elements(temp[1][r], es), "workspace"),
                    scratch[r], "workspace");
    peak = std::max(peak, elements);
  }
  spec.peak_workspace_bytes = checked_mul(peak, es, "the plan's peak workspace in bytes");
  if (spec.to_dtype)
    spec.peak_workspace_bytes = checked_add(spec.peak_workspace_bytes, conversion_staging_bytes(spec.dst, spec.dtype),
                                            "the plan's peak workspace");
  if (spec.memory_budget_bytes)
    RESHARD_REQUIRE(spec.peak_workspace_bytes <= *spec.memory_budget_bytes, "the plan needs ",
                    spec.peak_workspace_bytes, " bytes of workspace per rank, over its memory budget of ",
                    *spec.memory_budget_bytes, " bytes");
  Transport transport = Transport::kNccl;  // as Plan::transport(): nvlink when any step is
  for (const Step& s : spec.steps)
    if (s.transport == Transport::kNvlink) transport = Transport::kNvlink;
  auto chosen = std::find_if(spec.candidates.begin(), spec.candidates.end(), [&](const Candidate& c) {
    return c.strategy == spec.strategy && c.transport == transport;
  });
  if (chosen == spec.candidates.end()) {
    spec.candidates.push_back(Candidate{});
    chosen = spec.candidates.end() - 1;
    chosen->strategy = spec.strategy;
    chosen->transport = transport;
  }
  chosen->available = true;
  chosen->reason.clear();
  chosen->estimated_us = spec.estimated_us;
  chosen->steps = static_cast<int>(spec.steps.size());
  chosen->bytes_moved = spec.bytes_moved;
  chosen->peak_workspace_bytes = spec.peak_workspace_bytes;
  chosen->route = route_text(spec.steps);
  for (Candidate& c : spec.candidates)
    c.fits_budget = !spec.memory_budget_bytes || c.peak_workspace_bytes <= *spec.memory_budget_bytes;
}

}  // namespace reshard::detail
