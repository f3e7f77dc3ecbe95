// The collective strategy: the cheapest chain of single collectives from the source to the target placements.
#pragma once

#include <limits>
#include <optional>
#include <string>

#include "pricing/step_pricing.hpp"
#include "search/layout_cache.hpp"

namespace reshard::detail {

struct Route {
  std::vector<PricedStep> steps;
  double us = 0;
};

// Dijkstra over placements (one per mesh dim: R, S(d), and P(op) where the source has it). Edges are single
// collectives on one mesh dim (all_gather S->R, all_to_all S(i)->S(j), reduce_scatter P->S, all_reduce P->R) or,
// for all_gather, reduce_scatter, all_reduce and local chunks R->S, on a flattened set of mesh dims; each checked by
// box geometry (so uneven and nested sharding are handled exactly) and priced by `pricer`. Ties go to fewer steps.
// nullopt with `reason` set when the target cannot be reached by collectives (e.g. a Partial target from a non-Partial
// source). With max_collectives set, only routes with at most that many communication steps are considered.
// The search has a fixed work budget (kSearchBudget: 2^19 rank boxes computed, edges checked counting 16 each); past
// it, nullopt with a `reason` naming the mesh and the budget. The budget is a count, not a time, so every rank of a job
// decides alike.
// Edges that provably cannot change the route are not checked or priced (StepPricer::collective_floor against the
// target's tentative cost and the best route to the target found so far) where the search cannot reach its budget; the
// route is the one the full search returns (where equal costs leave the order to the heap, the full search is run).
// A reference pricer (StepPricer::reference) searches in full.
// `cache`: the planning's layouts (shared with its other searches; the work budget counts every layout this search
// visits, cached or not, so that the decision does not depend on what other searches built).
// `above` (finite): the caller needs the route only if it costs at most `above` (a cheaper candidate is known). Where
// the pruned search shows that no route does (it stops once everything at or below `above` is searched), it returns
// nullopt with `*costlier` set and `reason` untouched; otherwise it returns what it returns without `above` (the same
// route, or nullopt with the same reason).
std::optional<Route> search_collective_route(const Layout& src, const Layout& dst, const StepPricer& pricer,
                                             std::optional<int> max_collectives, LayoutCache& cache,
                                             std::string* reason,
                                             double above = std::numeric_limits<double>::infinity(),
                                             bool* costlier = nullptr);

}  // namespace reshard::detail
