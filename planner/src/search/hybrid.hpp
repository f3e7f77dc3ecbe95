// The hybrid strategy: collectives where a single collective serves a mesh dim, one p2p step for the rest.
#pragma once

#include <limits>
#include <optional>
#include <string>

#include "reshard/plan_options.hpp"
#include "search/collective_search.hpp"

namespace reshard::detail {

// Enumerates, for the mesh dims whose placement changes, a role each:
//   pre  — a single collective (or local chunk) takes the dim straight to its target before the p2p step;
//   post — the target is Replicate: the p2p step leaves the dim Shard(d) and an all_gather finishes it;
//   p2p  — the p2p step handles it.
// with at least one p2p dim and one pre/post dim, every order of the pre and post collectives that is valid,
// and every d for the post dims; prices each and returns the cheapest. nullopt with `reason` when none exists.
// The p2p step runs on `transport`; on nccl across nodes the chosen route's p2p step is relayed or mixes transports
// where `options` allow it and that is cheaper (relayed_step.hpp), as the p2p strategy's. P2P steps are priced without
// keeping their transfers (materialise them for the route that is used). `above` (finite): the caller needs the route
// only if it costs at most `above`. Routes whose collectives before the p2p step already cost more are not priced
// further; where no route is left at or below it, nullopt with `*costlier` set and `reason` untouched; otherwise what
// the search returns without `above` (the same route, or nullopt with the same reason).
std::optional<Route> best_hybrid_route(const Layout& src, const Layout& dst, const StepPricer& pricer,
                                       Transport transport, const PlanOptions& options, LayoutCache& cache,
                                       std::string* reason, double above = std::numeric_limits<double>::infinity(),
                                       bool* costlier = nullptr);

}  // namespace reshard::detail
