// The p2p step on nccl of a world that spans nodes, in the forms that cross between nodes less or that carry the
// traffic within a node on NVLink: relayed (relays.hpp) and mixing transports (Step::mixed); and which of those forms
// a planning offers (internal to the planner's searches).
#pragma once

#include <vector>

#include "pricing/step_pricing.hpp"
#include "reshard/plan_options.hpp"

namespace reshard::detail {

// Steps listing more transfers than this (every rank of a mesh past about 256 ranks talking to every other) keep
// their flat form: the other forms are priced transfer by transfer, in time linear in the transfers listed.
inline constexpr size_t kMaxNodeAwareTransfers = size_t(1) << 16;

// Whether a p2p step from a layout on `mesh_layout`'s world has node-aware forms under `options`: the world spans
// more than one node, and relays are not `never` or transports may mix (transport auto, peer access).
bool node_aware(const Layout& mesh_layout, const PlanOptions& options);

// `all`: every transfer of the nccl p2p step `step` (a step that reduces nothing) from `a` to `b`. Of the step as it
// is, relayed (its transfers with holders per node, relays.hpp, where the rule relays some transfer and
// options.relay is not never) and mixing transports (where options.transport is auto and the topology has peer
// access), each form also both, `step` becomes the cheapest (options.relay always: the cheapest relayed one, where
// the rule relays something).
void node_aware_step(std::vector<Transfer> all, const RankBoxes& a, const RankBoxes& b, const StepPricer& pricer,
                     const PlanOptions& options, PricedStep& step);

// Whether transports may mix within a step under `options`: transport auto and peer access.
bool may_mix(const PlanOptions& options);

// A pricer for one planning under `options`: an all_reduce's node stages may run one-sided where transports may mix
// (StepPricer::offer_one_sided_node_stages), at the price of mapping the caller's tensors on every call where they
// change (StepPricer::price_changing_buffers).
StepPricer planning_pricer(const CostModel& model, DType dtype, Index chunk_bytes, const PlanOptions& options,
                           bool reference);

}  // namespace reshard::detail
