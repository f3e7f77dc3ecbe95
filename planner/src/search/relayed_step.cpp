#include "search/relayed_step.hpp"

#include <algorithm>

#include "plan/relays.hpp"

namespace reshard::detail {

bool may_mix(const PlanOptions& options) {
  return options.transport == Transport::kAuto && options.topology.peer_access;
}

StepPricer planning_pricer(const CostModel& model, DType dtype, Index chunk_bytes, const PlanOptions& options,
                           bool reference) {
  StepPricer pricer(model, dtype, chunk_bytes, options.fusion, reference);
  pricer.offer_one_sided_node_stages(may_mix(options));
  pricer.price_changing_buffers(options.buffers_change);
  return pricer;
}

bool node_aware(const Layout& mesh_layout, const PlanOptions& options) {
  return mesh_layout.mesh().world_size() > options.topology.ranks_per_node &&
         (options.relay != Relay::kNever || may_mix(options));
}

void node_aware_step(std::vector<Transfer> all, const RankBoxes& a, const RankBoxes& b, const StepPricer& pricer,
                     const PlanOptions& options, PricedStep& step) {
  std::vector<Transfer> relayed;
  bool relays = false;
  if (options.relay != Relay::kNever) {
    relayed = per_node_transfers(a.layout(), b.layout(), pricer.model().topology(), pricer.element_size());
    relay_transfers(relayed, pricer.model().topology());
    relays = std::any_of(relayed.begin(), relayed.end(), [](const Transfer& t) { return t.is_relayed(); });
  }
  std::vector<PricedStep> forms;
  const bool flat = !(relays && options.relay == Relay::kAlways);
  if (flat && may_mix(options)) forms.push_back(price_listed_p2p(pricer, a, b, all, Transport::kNccl, false, true));
  if (relays) {
    forms.push_back(price_listed_p2p(pricer, a, b, relayed, Transport::kNccl, false));
    if (may_mix(options)) forms.push_back(price_listed_p2p(pricer, a, b, relayed, Transport::kNccl, false, true));
  }
  if (forms.empty()) return;
  auto best = std::min_element(forms.begin(), forms.end(), [](const PricedStep& x, const PricedStep& y) {
    return x.step.estimated_us < y.step.estimated_us;
  });
  if (!flat || best->step.estimated_us < step.step.estimated_us) step = std::move(*best);
}

}  // namespace reshard::detail
