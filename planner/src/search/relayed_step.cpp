#include "search/relayed_step.hpp"

#include <algorithm>

#include "plan/relays.hpp"

namespace reshard::detail {

bool may_relay(const Layout& mesh_layout, const PlanOptions& options) {
  return options.relay != Relay::kNever && mesh_layout.mesh().world_size() > options.topology.ranks_per_node;
}

void relay_step(std::vector<Transfer> all, const RankBoxes& a, const RankBoxes& b, const StepPricer& pricer,
                Relay relay, PricedStep& step) {
  if (relay == Relay::kNever) return;
  relay_transfers(all, pricer.model().topology());
  if (std::none_of(all.begin(), all.end(), [](const Transfer& t) { return t.is_relayed(); })) return;
  PricedStep relayed = price_listed_p2p(pricer, a, b, all, Transport::kNccl, false);
  if (relay == Relay::kAlways || relayed.step.estimated_us < step.step.estimated_us) step = std::move(relayed);
}

}  // namespace reshard::detail
