#include "search/collective_search.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <queue>

#include "plan/transitions.hpp"
#include "reshard/partial.hpp"
#include "search/flat_map.hpp"

namespace reshard::detail {
namespace {

using Key = std::uint64_t;
constexpr int kCollectiveWeight = 1000;

// Work budget of one search, in rank boxes: every layout whose boxes are computed costs its rank count (the time and
// memory of a search go there), every edge checked and priced on them kEdgeCost. The budget is a count, not a time,
// so every rank of a job (each planning on its own) reaches the same decision. At its limit a search takes about
// 0.8 s and 80 MB on two cores (docs/planner.md).
constexpr Index kSearchBudget = Index(1) << 19;
constexpr Index kEdgeCost = 16;
// The most (rank, group member) pairs of an all_to_all step the search takes: a plan's workspace sizes every rank's
// all_to_all scratch from its whole group (each rank's regions from and to every member), which is ranks x group size
// visits, about 4 s at this limit on two cores (a group of 8,192 ranks); a larger all_to_all is not an edge.
constexpr Index kMaxAllToAllPairs = Index(1) << 26;
constexpr int kCountShift = 5 * kMaxDims;  // bits above the placements hold the number of collectives so far

// 5 bits per mesh dim: R, S(d), P(op), then the _StridedShard placements of the source and target (numbered per
// search: at most one per mesh dim on each side).
constexpr int kStridedCodeBase = 1 + kMaxDims + 4;
static_assert(kStridedCodeBase + 2 * kMaxDims <= 32, "placement codes must fit in 5 bits");

// The best step found into a search state (its Step is built only for the route returned).
struct Edge {
  Key prev = 0;
  StepKind kind = StepKind::kLocal;
  int ndims = 0;
  std::array<int, kMaxDims> dims{};
  StepPrice price;
};

struct Visit {
  double cost = 0;
  int steps = 0;
  bool done = false;
  bool has_edge = false;
  bool edge_deferred = false;  // the edge's offer came from the deferred edges (Search::relax_edge)
  bool equal_offer = false;    // an offer of the same cost and steps came whose order against the edge's may differ
  Edge edge;
};

struct KeyHash {
  std::size_t operator()(Key k) const { return static_cast<std::size_t>(k ^ (k >> 29)); }
};
template <class V>
using KeyMap = FlatMap<Key, V, KeyHash>;

// A state's placements and, once a search asks for them, its rank boxes (from the planning's cache).
struct PlacementState {
  std::vector<Placement> placements;
  const RankBoxes* boxes = nullptr;
};

struct QueueEntry {
  double cost;
  int steps;
  Key key;
  bool operator>(const QueueEntry& o) const { return cost != o.cost ? cost > o.cost : steps > o.steps; }
};

// An edge not yet checked or priced: from a popped state (its cost and steps), with the floor of its offer.
struct PendingEdge {
  double floor;
  std::uint32_t seq;  // equal floors: in the order the edges were met
  Key from_key, to_key;
  double cost;
  int steps;
  StepKind kind;
  int ndims;
  std::array<int, kMaxDims> dims;
  bool operator>(const PendingEdge& o) const { return floor != o.floor ? floor > o.floor : seq > o.seq; }
};

class Search {
 public:
  // `prune`: skip edges that provably cannot change the route (below), where the search cannot reach its budget.
  // `above` (pruned searches): only routes costing at most `above` matter (bounded()).
  Search(const Layout& src, const Layout& dst, const StepPricer& pricer, std::optional<int> max_collectives,
         LayoutCache& cache, bool prune, double above = std::numeric_limits<double>::infinity())
      : src_(src), dst_(dst), pricer_(pricer), max_collectives_(max_collectives), cache_(cache) {
    const Mesh& mesh = src.mesh();
    // A mesh dim that is the same Partial in source and target keeps its contributions (partial.hpp, "kept"): no
    // step touches it. (Reducing it and partitioning again gives the same global value but other local shards than
    // PyTorch's redistribute, which leaves the contributions as they are.)
    const std::vector<int> kept = partial_roles(mesh, src.placements(), dst.placements()).kept;
    for (int k = 0; k < mesh.ndim(); ++k)
      if (mesh.dim_size(k) > 1 && std::find(kept.begin(), kept.end(), k) == kept.end()) movable_.push_back(k);
    for (const Layout* l : {&src, &dst})
      for (const Placement& p : l->placements())
        if (p.is_strided() && std::find(strided_.begin(), strided_.end(), p) == strided_.end()) strided_.push_back(p);
    for (int k = 0; k < mesh.ndim(); ++k) options_.push_back(options(k));
    // Pruning relies on Dijkstra's order: communication steps never cost less than the step overhead (local steps are
    // never skipped, and a negative price among them sends the caller to the full search).
    prune_ = prune && !can_exhaust() && pricer.model().step_overhead_us() >= 0;
    // A bound prunes as a route to the goal found at that cost would: edges whose floor exceeds it are left out, and
    // the search stops before popping a state that costs more.
    bounded_ = prune_ && above < std::numeric_limits<double>::infinity();
    if (bounded_) goal_cost_ = above;
  }

  // Whether only routes at or below a bound were searched: run() then returns nullopt when none exists.
  bool bounded() const { return bounded_; }

  // Whether the search stopped at its work budget (run() then returned nullopt).
  bool exhausted() const { return exhausted_; }
  // Whether an all_to_all edge was left out for its size (kMaxAllToAllPairs).
  bool skipped_all_to_all() const { return skipped_all_to_all_; }
  Index work() const { return work_; }
  // Whether a pruned search may have chosen otherwise than the full one (run it again unpruned). A pruned search
  // checks and prices a communication step only once the heap reaches its floor (cost so far + the step's floor), so
  // steps whose floor lies past the goal are never priced. Every offer is still made before any state at or above it is
  // popped, so every state popped before the goal keeps its cost and steps; but offers come in another order, and
  // entries costlier than the goal are left out of the heap (which may then pop states of equal cost and steps in
  // another order), and the first of equal offers stays. The route is the full search's unless some state on it had
  // equal offers whose order may differ (one of them deferred, or from two states that tie), two goal states (counts of
  // collectives) tie, or a step's price was negative or NaN (the costs would not be ordered as above).
  bool unsure() const { return (skipped_past_goal_ || deferred_any_) && (tie_ || exhausted_); }

  std::optional<Route> run() {
    const Key start = key_of(src_.placements()), goal = key_of(dst_.placements());
    states_[start].placements = src_.placements();
    const Key placement_mask = (Key(1) << kCountShift) - 1;
    visits_[start] = Visit{};
    std::vector<QueueEntry> room;
    room.reserve(32);  // one allocation for a small mesh's search, not one per doubling
    queue_ = decltype(queue_)(std::greater<QueueEntry>(), std::move(room));
    queue_.push({0.0, 0, start});
    goal_ = goal;
    while (true) {
      // Deferred edges whose floor the heap has reached make their offers first.
      while (!pending_.empty() && (queue_.empty() || pending_.top().floor <= queue_.top().cost)) {
        const PendingEdge p = pending_.top();
        pending_.pop();
        relax_edge(p, true);
      }
      if (queue_.empty()) break;
      QueueEntry e = queue_.top();
      if (bounded_ && e.cost > goal_cost_) {  // every state within the bound was popped (never so past a found goal)
        skipped_past_goal_ = true;
        break;
      }
      queue_.pop();
      Visit& v = visits_[e.key];
      if (v.done) continue;
      v.done = true;
      if ((e.key & placement_mask) == goal) {
        if (prune_) tie_ = tie_ || goal_tie(e.key) || route_tie(e.key);
        skipped_past_goal_ = skipped_past_goal_ || !pending_.empty();
        return route_to(e.key);
      }
      expand(e.key, v.cost, v.steps);
      if (exhausted_) return std::nullopt;
    }
    return std::nullopt;
  }

 private:
  int code(const Placement& p) const {
    if (p.is_strided())
      return kStridedCodeBase + static_cast<int>(std::find(strided_.begin(), strided_.end(), p) - strided_.begin());
    switch (p.kind()) {
      case Placement::Kind::kReplicate:
        return 0;
      case Placement::Kind::kShard:
        return 1 + p.dim();
      case Placement::Kind::kPartial:
        return 1 + kMaxDims + static_cast<int>(p.op());
    }
    return 0;
  }

  Key key_of(const std::vector<Placement>& ps) const {
    Key k = 0;
    for (size_t i = 0; i < ps.size(); ++i) k |= static_cast<Key>(code(ps[i])) << (5 * i);
    return k;
  }

  // Search keys carry the number of collectives (when capped); placements and boxes are per placements only.
  static Key placements_key(Key k) { return k & ((Key(1) << kCountShift) - 1); }
  static int collectives(Key k) { return static_cast<int>(k >> kCountShift); }

  const RankBoxes& boxes(Key k) {
    PlacementState& state = states_[placements_key(k)];
    if (!state.boxes) {
      spend(src_.mesh().size());
      state.boxes = &cache_.boxes(state.placements);
    }
    return *state.boxes;
  }

  // A state the search has reached.
  const PlacementState& state(Key k) {
    const PlacementState* s = states_.find(k);
    if (!s) fail(ErrorKind::kInternal, "a collective search state that was never reached");
    return *s;
  }

  // Charges `units` of work; false once the budget is spent.
  bool spend(Index units) {
    work_ += units;
    exhausted_ = exhausted_ || work_ > kSearchBudget;
    return !exhausted_;
  }

  // Whether the search could spend its budget: every state's boxes and every state's edges (at most one expansion
  // per search key) counted, as an upper bound.
  bool can_exhaust() const {
    double states = 1, edges = 0;
    for (int k : movable_) {
      states *= static_cast<double>(options_[k].size());
      edges += static_cast<double>(options_[k].size());
    }
    edges += 2.0 * std::ldexp(1.0, static_cast<int>(movable_.size()));
    const double keys = states * (max_collectives_ ? static_cast<double>(*max_collectives_) + 1 : 1.0);
    const double bound = states * src_.mesh().size() + keys * edges * static_cast<double>(kEdgeCost);
    return !(bound <= static_cast<double>(kSearchBudget) / 2);
  }

  // Placements a mesh dim may take: R and every S(d); P(op) where the source has it (it can be reduced away) or
  // the target has it (a local step partitions a replicated value into it); the target's _StridedShard.
  std::vector<Placement> options(int k) const {
    std::vector<Placement> out{Placement::replicate()};
    for (int d = 0; d < src_.ndim(); ++d) out.push_back(Placement::shard(d));
    if (src_.placement(k).is_partial()) out.push_back(src_.placement(k));
    const Placement& t = dst_.placement(k);
    if ((t.is_partial() || t.is_strided()) && !(t == src_.placement(k))) out.push_back(t);
    return out;
  }

  void expand(Key from_key, double cost, int steps) {
    // A reference: the map's elements stay where they are while try_edge inserts (FlatMap keeps them in a deque).
    const std::vector<Placement>& from = state(placements_key(from_key)).placements;
    const std::vector<Placement>& target = dst_.placements();
    std::vector<Placement>& to = to_;  // buffers reused by every edge (no allocation per edge)
    std::vector<int>& dims = dims_;
    // Single mesh dims: every other placement.
    for (int k : movable_) {
      for (const Placement& p : options_[k]) {
        if (p == from[k]) continue;
        to = from;
        to[k] = p;
        dims.assign(1, k);
        try_edge(from_key, from, to, dims, cost, steps);
      }
    }
    // Flattened sets of mesh dims (2 or more), moving each dim to R or to its target placement: one NCCL
    // collective on the flattened communicator instead of one per mesh dim.
    const int m = static_cast<int>(movable_.size());
    for (unsigned mask = 1; mask < (1u << m); ++mask) {
      if (__builtin_popcount(mask) < 2) continue;
      dims.clear();
      for (int j = 0; j < m; ++j)
        if (mask & (1u << j)) dims.push_back(movable_[j]);
      for (int variant = 0; variant < 2; ++variant) {
        to = from;
        bool changed_all = true;
        for (int k : dims) {
          to[k] = variant == 0 ? Placement::replicate() : target[k];
          changed_all = changed_all && !(to[k] == from[k]);
        }
        // A flattened all_to_all is a p2p step under another name: all_to_all stays on single mesh dims.
        std::optional<StepKind> kind = transition_kind(from, to, dims);
        if (changed_all && kind && *kind != StepKind::kAllToAll) try_edge(from_key, from, to, dims, cost, steps);
      }
    }
  }

  void try_edge(Key from_key, const std::vector<Placement>& from, const std::vector<Placement>& to,
                const std::vector<int>& dims, double cost, int steps) {
    if (exhausted_) return;
    std::optional<StepKind> kind = transition_kind(from, to, dims);
    if (!kind) return;
    if (*kind == StepKind::kAllToAll &&
        static_cast<Index>(src_.mesh().size()) * src_.mesh().group_size(dims) > kMaxAllToAllPairs) {
      skipped_all_to_all_ = true;
      return;
    }
    if (!reduction_exact(src_.mesh(), from, to, dst_.placements(), pricer_.dtype(), true)) return;
    Key to_key = key_of(to);
    if (max_collectives_) {
      int count = collectives(from_key) + (is_communication(*kind) ? 1 : 0);
      if (count > *max_collectives_) return;
      to_key |= static_cast<Key>(count) << kCountShift;
    }
    const Visit* seen = visits_.find(to_key);
    if (seen && seen->done) return;
    if (!states_.find(placements_key(to_key))) {
      const bool strided = std::any_of(to.begin(), to.end(), [](const Placement& p) { return p.is_strided(); });
      if (strided && !src_.with_placements(to).one_box_per_rank()) return;  // a _StridedShard state, not boxes
      states_[placements_key(to_key)].placements = to;
    }
    // Both layouts count against this search's budget (their boxes come from the planning's cache).
    const RankBoxes& from_boxes = boxes(from_key);
    double least = cost;
    if (prune_) {
      // The step's price is at least its floor: an edge whose floor leaves it no better than the target's tentative
      // cost changes nothing (the full search would not update or push the target); one that costs more than a route
      // to the goal already found is never expanded before the goal (its entry would sort after the goal's), so it
      // cannot be on the route, though leaving it out of the heap may reorder entries of equal cost and steps
      // (run() notes those, and the caller then searches again unpruned).
      least = cost + pricer_.collective_floor(from_boxes, *kind, dims);
      if (seen && seen->has_edge && least > seen->cost) return;
      if (least > goal_cost_) {
        skipped_past_goal_ = true;
        return;
      }
    }
    PendingEdge p{least, seq_++, from_key, to_key, cost, steps, *kind, static_cast<int>(dims.size()), {}};
    std::copy(dims.begin(), dims.end(), p.dims.begin());
    // A step whose floor is more than the step overhead (a large gather or all_reduce) is priced once the heap reaches
    // its floor; others at once (deferring those changes the order of equal offers, which small tensors meet often).
    if (prune_ && least > cost + pricer_.model().step_overhead_us()) {
      deferred_any_ = true;
      pending_.push(p);
      return;
    }
    relax_edge(p, false);
  }

  // Checks and prices an edge met by try_edge and offers its target the cost through it.
  void relax_edge(const PendingEdge& p, bool deferred) {
    const Visit* seen = visits_.find(p.to_key);
    if (seen && seen->done) return;  // popped at or below the floor: the offer cannot be better
    if (deferred && ((seen && seen->has_edge && p.floor > seen->cost) || p.floor > goal_cost_)) {
      skipped_past_goal_ = skipped_past_goal_ || p.floor > goal_cost_;
      return;
    }
    const RankBoxes& from_boxes = boxes(p.from_key);
    const RankBoxes* to_boxes = nullptr;
    try {
      to_boxes = &boxes(p.to_key);
    } catch (const Error& e) {
      // A layout whose ranks together hold more than int64 counts (a huge tensor replicated) is no way through.
      if (e.kind() != ErrorKind::kInvalidArgument) throw;
      return;
    }
    if (!spend(kEdgeCost)) return;
    std::vector<int>& dims = edge_dims_;
    dims.assign(p.dims.begin(), p.dims.begin() + p.ndims);
    const std::optional<StepPrice> valid = cache_.collective_step(from_boxes, *to_boxes, p.kind, dims, pricer_);
    if (!valid) return;
    const StepPrice price = *valid;
    tie_ = tie_ || !(price.us >= 0);  // a negative or NaN price (unsure())
    double c = p.cost + price.us;
    int s = p.steps + (is_communication(p.kind) ? kCollectiveWeight : 1);  // ties: fewer collectives, then fewer steps
    Visit& v = visits_[p.to_key];
    bool better = !v.has_edge || c < v.cost || (c == v.cost && s < v.steps);
    if (!better) {
      // An equal offer whose order against the edge's may differ in the full search: one of them deferred, or from
      // states popped in the same place (equal cost and steps: the heap's choice). From the same state both come in
      // the order they were met.
      if (c == v.cost && s == v.steps && p.from_key != v.edge.prev) {
        const Visit& other = visits_[v.edge.prev];
        v.equal_offer =
            v.equal_offer || deferred || v.edge_deferred || (other.cost == p.cost && other.steps == p.steps);
      }
      return;
    }
    v.equal_offer = false;
    v.edge_deferred = deferred;
    v.cost = c;
    v.steps = s;
    v.has_edge = true;
    v.edge = Edge{p.from_key, p.kind, p.ndims, p.dims, price};
    queue_.push({c, s, p.to_key});
    if (placements_key(p.to_key) == goal_) goal_cost_ = std::min(goal_cost_, c);
  }

  // Whether another goal state (another count of collectives) waits with the same cost and steps as `goal`.
  bool goal_tie(Key goal) {
    if (!max_collectives_) return false;
    const Visit& g = visits_[goal];
    for (int count = 0; count <= *max_collectives_; ++count) {
      const Key k = goal_ | static_cast<Key>(count) << kCountShift;
      const Visit* v = k == goal ? nullptr : visits_.find(k);
      if (v && v->has_edge && v->cost == g.cost && v->steps == g.steps) return true;
    }
    return false;
  }

  // Whether a state on the route to `goal` had equal offers from two states that tie.
  bool route_tie(Key goal) {
    for (Key k = goal; visits_[k].has_edge; k = visits_[k].edge.prev)
      if (visits_[k].equal_offer) return true;
    return false;
  }

  Route route_to(Key goal) {
    Route r;
    Key k = goal;
    int n = 0;
    for (Key j = goal; visits_[j].has_edge; j = visits_[j].edge.prev) ++n;
    r.steps.reserve(n);
    while (visits_[k].has_edge) {
      const Edge& e = visits_[k].edge;
      r.steps.push_back(PricedStep{Step{e.kind,
                                        std::vector<int>(e.dims.begin(), e.dims.begin() + e.ndims),
                                        state(placements_key(e.prev)).placements,
                                        state(placements_key(k)).placements,
                                        {},
                                        e.price.us,
                                        e.price.bytes_moved},
                                   {}});
      r.steps.back().step.hierarchical = e.price.hierarchical;
      r.steps.back().step.mixed = e.price.node_one_sided;
      k = e.prev;
    }
    std::reverse(r.steps.begin(), r.steps.end());
    for (const PricedStep& s : r.steps) r.us += s.step.estimated_us;
    return r;
  }

  const Layout& src_;
  const Layout& dst_;
  const StepPricer& pricer_;
  std::optional<int> max_collectives_;
  std::vector<int> movable_;
  std::vector<std::vector<Placement>> options_;  // per mesh dim: options(k)
  std::vector<Placement> to_;                    // expand()'s buffers
  std::vector<int> dims_;
  std::vector<Placement> strided_;  // the _StridedShard placements of the source and target, by code
  Index work_ = 0;
  bool exhausted_ = false;
  bool skipped_all_to_all_ = false;  // skipped_all_to_all()
  bool prune_ = false;
  bool bounded_ = false;                                        // goal_cost_ started at a caller's bound
  Key goal_ = 0;                                                // the target's placements key
  double goal_cost_ = std::numeric_limits<double>::infinity();  // the cheapest route to the goal found so far
  bool skipped_past_goal_ = false;                              // an edge was skipped against goal_cost_
  bool tie_ = false;  // the route might depend on the order of equal entries, or prices are not ordered (unsure())
  bool deferred_any_ = false;  // an edge was deferred (priced once the heap reached its floor)
  std::uint32_t seq_ = 0;      // edges met so far
  std::priority_queue<PendingEdge, std::vector<PendingEdge>, std::greater<PendingEdge>> pending_;
  std::vector<int> edge_dims_;     // relax_edge()'s buffer
  KeyMap<PlacementState> states_;  // by placements key
  LayoutCache& cache_;
  KeyMap<Visit> visits_;  // by search key
  std::priority_queue<QueueEntry, std::vector<QueueEntry>, std::greater<QueueEntry>> queue_;
};

// The search's route, or nullopt with `reason` set.
std::optional<Route> finish(const Search& search, std::optional<Route> r, const Layout& src,
                            std::optional<int> max_collectives, std::string* reason) {
  if (!r && reason && search.exhausted())
    *reason = cat("the search for a chain of collectives exceeded its budget (", kSearchBudget, " rank boxes) on mesh ",
                  src.mesh().str(), " with a ", src.ndim(),
                  "-D tensor; choose --strategy p2p or hybrid, or cap --max-collectives");
  else if (!r && reason)
    *reason = cat(max_collectives ? cat("no chain of at most ", *max_collectives, " collectives reaches the target")
                                  : std::string("no chain of collectives reaches the target"),
                  search.skipped_all_to_all() ? cat(" (all_to_all steps over more than ", kMaxAllToAllPairs,
                                                    " rank x group member pairs are not planned)")
                                              : std::string());
  return r;
}

}  // namespace

std::optional<Route> search_collective_route(const Layout& src, const Layout& dst, const StepPricer& pricer,
                                             std::optional<int> max_collectives, LayoutCache& cache,
                                             std::string* reason, double above, bool* costlier) {
  // The pruned search, and the full one where the pruned one cannot vouch for its choice (rare: equal costs, or
  // negative or NaN prices). The reference planner searches in full (tests/planner/planner_equivalence_test.cpp
  // compares the two).
  Search pruned(src, dst, pricer, max_collectives, cache, !pricer.reference(), above);
  std::optional<Route> r = pruned.run();
  if (!pruned.unsure()) {
    if (r || !pruned.bounded()) return finish(pruned, std::move(r), src, max_collectives, reason);
    if (costlier) *costlier = true;  // no route costs at most `above` (or none at all: the full search would say)
    return std::nullopt;
  }
  Search search(src, dst, pricer, max_collectives, cache, false);
  r = search.run();
  return finish(search, std::move(r), src, max_collectives, reason);
}

}  // namespace reshard::detail
