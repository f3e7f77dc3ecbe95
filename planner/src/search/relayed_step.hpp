// Offering a relayed p2p step (relays.hpp) beside the flat one (internal to the planner's searches).
#pragma once

#include <vector>

#include "pricing/step_pricing.hpp"
#include "reshard/plan_options.hpp"

namespace reshard::detail {

// Whether a p2p step from a layout on `mesh_layout`'s world may relay under `options`: relay not never, and the world
// spanning more than one node.
bool may_relay(const Layout& mesh_layout, const PlanOptions& options);

// `all`: every transfer of the nccl p2p step `step` (a step that reduces nothing) from `a` to `b`. Where the rule
// relays some of them, `step` becomes the relayed step (priced by price_listed_p2p) when `relay` is always, or under
// auto when that is cheaper.
void relay_step(std::vector<Transfer> all, const RankBoxes& a, const RankBoxes& b, const StepPricer& pricer,
                Relay relay, PricedStep& step);

}  // namespace reshard::detail
