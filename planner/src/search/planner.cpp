#include "reshard/planner.hpp"

#include <algorithm>
#include <limits>
#include <map>

#include "plan/cross_mesh_transfers.hpp"
#include "plan/pending_candidates.hpp"
#include "plan/relays.hpp"
#include "plan/route_text.hpp"
#include "pricing/profile_bounds.hpp"
#include "reshard/overlap.hpp"
#include "reshard/partial.hpp"
#include "search/collective_search.hpp"
#include "search/cross_mesh.hpp"
#include "search/hybrid.hpp"
#include "search/planner_reference.hpp"
#include "search/relayed_step.hpp"
#include "search/request_spec.hpp"
#include "search/workspace_peak.hpp"

namespace reshard {
namespace {

using detail::Route;

struct Built {
  Candidate summary;
  std::vector<detail::PricedStep> steps;
  Index chunk_bytes = 0;  // the pipeline chunk its exchanges were priced (and will be lowered) with
};

// Memory budgets pipeline exchanges in chunks down to this size.
constexpr Index kMinChunkBytes = 256;

// `candidates`, whose entries `incomplete` are planned again in full on first read (Planner::candidate) from copies of
// the planning's inputs.
std::shared_ptr<detail::PendingCandidates> plan_again_later(std::vector<Candidate> candidates,
                                                            std::vector<int> incomplete, const Layout& src,
                                                            const Layout& dst, DType dtype, const PlanOptions& options,
                                                            std::optional<int> rank);

class Planner {
 public:
  Planner(const Layout& src, const Layout& dst, DType dtype, const PlanOptions& options, std::optional<int> rank,
          bool reference)
      : src_(src),
        dst_(dst),
        dtype_(dtype),
        options_(options),
        rank_(rank),
        reference_(reference),
        model_(options.profile, options.topology, options.low_sm),
        pricer_(detail::planning_pricer(model_, dtype, options.pipeline_chunk_bytes, options, reference)),
        cache_(src, options.topology, element_size(dtype)) {
    validate_inputs();
    csrc_ = src.with_placements(canonical_placements(src.mesh(), src.placements()));
    cdst_ = src.with_placements(canonical_placements(dst.mesh(), dst.placements()));
  }

  Plan build() {
    // Only the requested strategy is built (every one under auto): planning cost stays with what was asked. Without a
    // memory budget, ranking needs only to know which candidate is cheapest, so what only reports read waits for the
    // plan's first read of its candidates (pending_candidates.hpp), which plans the others again in full: their peak
    // workspace and route, and the whole figures of those shown to cost more than a candidate built before them. The
    // reference planner computes every figure at once (the equivalence test compares the two).
    const bool defer = !reference_ && !options_.memory_budget_bytes;
    std::vector<bool> costlier;
    std::vector<Built> all = build_all(defer, costlier);
    if (options_.memory_budget_bytes) fit_budget(all);

    Built* chosen = &all[choose(all) - all.data()];  // its steps and every summary are moved into the plan
    if (defer) report(*chosen, pricer_);
    PlanSpec spec = detail::request_spec(src_, dst_, dtype_, options_, rank_);
    spec.pipeline_chunk_bytes = chosen->chunk_bytes;
    spec.strategy = chosen->summary.strategy;
    spec.estimated_us = chosen->summary.estimated_us;
    spec.bytes_moved = chosen->summary.bytes_moved;
    spec.peak_workspace_bytes = chosen->summary.peak_workspace_bytes;
    spec.candidates.reserve(all.size());
    for (Built& b : all) spec.candidates.push_back(std::move(b.summary));
    spec.steps.reserve(chosen->steps.size());
    for (detail::PricedStep& ps : chosen->steps) spec.steps.push_back(std::move(ps.step));
    materialize_transfers(spec.steps);
    // The reference planner's plans are validated; the fast planner's must equal them (the equivalence test).
    if (reference_) return Plan(std::move(spec));
    std::vector<int> incomplete;  // candidates to plan again on first read
    if (defer)
      for (size_t i = 0; i < all.size(); ++i)
        if (&all[i] != chosen && (costlier[i] || spec.candidates[i].available))
          incomplete.push_back(static_cast<int>(i));
    if (incomplete.empty()) return detail::trusted_plan(std::move(spec));
    std::shared_ptr<detail::PendingCandidates> pending =
        plan_again_later(std::move(spec.candidates), std::move(incomplete), src_, dst_, dtype_, options_, rank_);
    return detail::trusted_plan(std::move(spec), std::move(pending));
  }

  // Candidate `s` on `t` planned in full (every figure), as build() lists it.
  Candidate candidate(Strategy s, Transport t) {
    Built b = build_strategy(s, t, pricer_);
    finish(b, pricer_);
    return std::move(b.summary);
  }

 private:
  void validate_inputs() const {
    RESHARD_REQUIRE(src_.mesh() == dst_.mesh(), "source mesh ", src_.mesh().str(), " and target mesh ",
                    dst_.mesh().str(), " differ");
    RESHARD_REQUIRE(src_.global_shape() == dst_.global_shape(), "source shape ", to_string(src_.global_shape()),
                    " and target shape ", to_string(dst_.global_shape()), " differ");
    checked_mul(src_.global_volume(), element_size(dtype_), "tensor size in bytes");
    for (const Layout* l : {&src_, &dst_}) {
      std::optional<ReduceOp> op;
      for (int k = 0; k < l->mesh().ndim(); ++k) {
        const Placement& p = l->placement(k);
        if (!p.is_partial() || l->mesh().dim_size(k) == 1) continue;
        RESHARD_REQUIRE(!op || *op == p.op(), l == &src_ ? "source" : "target", " placements [",
                        to_string(l->placements()),
                        "] mix Partial reduce ops; the order of their reductions would be ambiguous");
        op = p.op();
      }
    }
    options_.topology.validate();
    RESHARD_REQUIRE(options_.pipeline_chunk_bytes >= 0, "pipeline chunk bytes must be >= 0, got ",
                    options_.pipeline_chunk_bytes);
    if (options_.memory_budget_bytes)
      RESHARD_REQUIRE(*options_.memory_budget_bytes >= 0, "memory budget must be >= 0 bytes, got ",
                      *options_.memory_budget_bytes);
    if (options_.max_collectives)
      RESHARD_REQUIRE(*options_.max_collectives >= 0, "max collectives must be >= 0, got ", *options_.max_collectives);
    if (rank_)
      RESHARD_REQUIRE(*rank_ >= 0 && *rank_ < src_.mesh().size(), "rank ", *rank_, " is not in mesh ",
                      src_.mesh().str());
  }

  // The transports p2p steps are priced on: the one asked for, or both where the topology has peer access (a step
  // whose transfers cross nodes is then unavailable on nvlink; the pricer says so).
  struct Transports {  // one or two, without allocating
    Transport t[2];
    int n = 1;
    const Transport* begin() const { return t; }
    const Transport* end() const { return t + n; }
  };
  Transports p2p_transports() const {
    switch (options_.transport) {
      case Transport::kNccl:
        return {{Transport::kNccl}};
      case Transport::kNvlink:
        RESHARD_REQUIRE(options_.topology.peer_access,
                        "transport nvlink needs GPUs that can address each other's memory, and the topology says "
                        "they cannot (peer access off); use --transport nccl or auto");
        return {{Transport::kNvlink}};
      case Transport::kAuto:
        break;
    }
    if (!options_.topology.peer_access) return {{Transport::kNccl}};
    return {{Transport::kNccl, Transport::kNvlink}, 2};
  }

  // Every candidate asked for, in the plan's order (collective, then p2p and hybrid on each transport); with `defer`,
  // without their reports (report()). With `defer` under auto, p2p candidates are built first, then the hybrids, then
  // the collective, each told the cheapest estimate so far: a search that shows it cannot reach it stops there, and
  // the candidate is left unavailable here with costlier[i] set (it loses: choose() keeps the first of the cheapest).
  // Not where the profile could price a step below zero (times_nonnegative).
  std::vector<Built> build_all(bool defer, std::vector<bool>& costlier) {
    struct Slot {
      Strategy s;
      Transport t;
    };
    Slot slots[5];  // collective, and p2p and hybrid on up to two transports
    int n = 0;
    for (Strategy s : {Strategy::kCollective, Strategy::kP2P, Strategy::kHybrid}) {
      if (options_.strategy != Strategy::kAuto && options_.strategy != s) continue;
      for (Transport t : s == Strategy::kCollective ? Transports{{Transport::kNccl}} : p2p_transports())
        slots[n++] = Slot{s, t};
    }
    std::vector<Built> all(n);
    costlier.assign(n, false);
    const bool bounded = defer && options_.strategy == Strategy::kAuto && detail::times_nonnegative(options_.profile);
    double cheapest = std::numeric_limits<double>::infinity();  // of the available candidates built so far
    const Strategy order[2][3] = {{Strategy::kCollective, Strategy::kP2P, Strategy::kHybrid},
                                  {Strategy::kP2P, Strategy::kHybrid, Strategy::kCollective}};
    for (Strategy s : order[bounded ? 1 : 0])
      for (int i = 0; i < n; ++i) {
        if (slots[i].s != s) continue;
        bool more = false;
        all[i] = build_strategy(s, slots[i].t, pricer_, bounded ? cheapest : kNoBound, &more);
        costlier[i] = more;
        finish(all[i], pricer_, !defer);
        if (all[i].summary.available) cheapest = std::min(cheapest, all[i].summary.estimated_us);
      }
    return all;
  }

  static constexpr double kNoBound = std::numeric_limits<double>::infinity();

  // Candidate `s` on `t`. `above`, `costlier`: where the collective or hybrid search shows that it costs more than
  // `above`, it is left unavailable (no reason) with *costlier set.
  Built build_strategy(Strategy s, Transport t, const detail::StepPricer& pricer, double above = kNoBound,
                       bool* costlier = nullptr) {
    Built b;
    switch (s) {
      case Strategy::kCollective:
        b = collective(pricer, above, costlier);
        break;
      case Strategy::kP2P:
        b = p2p(pricer, t);
        break;
      default:
        b = hybrid(pricer, t, above, costlier);
        break;
    }
    b.summary.transport = t;
    if (b.summary.available && !rank_) {
      if (std::string over = over_transfer_limit(b.steps); !over.empty()) b = unavailable(s, std::move(over));
      b.summary.transport = t;
    }
    return b;
  }

  // A global plan lists every transfer of its p2p steps: a candidate whose steps would list more than kMaxPlanTransfers
  // is unavailable, for the reason returned (empty when it fits); counted up to the limit only, in O(the limit).
  std::string over_transfer_limit(const std::vector<detail::PricedStep>& steps) {
    size_t total = 0;
    for (const detail::PricedStep& ps : steps) {
      const Step& s = ps.step;
      if (s.kind != StepKind::kP2P) continue;
      const OverlapIndex& index = cache_.overlap(s.from, s.to);
      total += index.transfer_count(kMaxPlanTransfers - std::min(total, kMaxPlanTransfers));
      if (total > kMaxPlanTransfers)
        return cat("the global plan's p2p step ", to_string(s.from), " -> ", to_string(s.to), " on mesh ",
                   index.src().mesh().str(), " lists more than ", kMaxPlanTransfers,
                   " transfers; a plan holds at most ", kMaxPlanTransfers,
                   " (plan one rank's part: --rank R, make_rank_plan; or --strategy collective)");
    }
    return {};
  }

  // Candidates over the memory budget are rebuilt with their exchanges pipelined in ever smaller chunks, whose
  // scratch rotates through two slots (chunking.hpp), until they fit or chunking stops shrinking them. A candidate
  // that never fits keeps its smallest version, for the error message.
  void fit_budget(std::vector<Built>& all) {
    const Index budget = *options_.memory_budget_bytes;
    const Index tensor_bytes = src_.global_volume() * element_size(dtype_);
    for (Built& b : all) {
      if (!b.summary.available || b.summary.fits_budget) continue;
      Index chunk = options_.pipeline_chunk_bytes > 0 ? options_.pipeline_chunk_bytes / 2 : tensor_bytes / 2;
      Index last_peak = b.summary.peak_workspace_bytes;
      int stalled = 0;  // halvings without a smaller workspace since the last one that helped
      bool helped = false;
      for (; chunk >= kMinChunkBytes && stalled < 2; chunk /= 2) {
        const detail::StepPricer pricer = detail::planning_pricer(model_, dtype_, chunk, options_, reference_);
        Built t = build_strategy(b.summary.strategy, b.summary.transport, pricer);
        if (!t.summary.available) break;
        finish(t, pricer);
        const bool smaller = t.summary.peak_workspace_bytes < last_peak;
        helped = helped || smaller;
        stalled = smaller ? 0 : stalled + (helped ? 1 : 0);
        last_peak = std::min(last_peak, t.summary.peak_workspace_bytes);
        if (t.summary.peak_workspace_bytes <= budget) {
          b = std::move(t);
          break;
        }
        if (t.summary.peak_workspace_bytes < b.summary.peak_workspace_bytes) b = std::move(t);
      }
    }
  }

  static Built unavailable(Strategy s, std::string reason) {
    Built b;
    b.summary.strategy = s;
    b.summary.available = false;
    b.summary.reason = std::move(reason);
    return b;
  }

  static Built from_route(Strategy s, Route r) {
    Built b;
    b.summary.strategy = s;
    b.summary.available = true;
    b.summary.estimated_us = r.us;
    b.steps = std::move(r.steps);
    return b;
  }

  // A plan for identical layouts is one local copy.
  Built identity(Strategy s) {
    Step copy{StepKind::kLocal, {}, csrc_.placements(), cdst_.placements(), {}, 0, 0};
    copy.estimated_us = model_.copy_us(boxes(csrc_.placements()).max_volume() * element_size(dtype_));
    return from_route(s, Route{{detail::PricedStep{copy, {}}}, copy.estimated_us});
  }

  Built collective(const detail::StepPricer& pricer, double above, bool* costlier) {
    if (csrc_.placements() == cdst_.placements()) return identity(Strategy::kCollective);
    std::string reason;
    std::optional<Route> r = detail::search_collective_route(csrc_, cdst_, pricer, options_.max_collectives, cache_,
                                                             &reason, above, costlier);
    return r ? from_route(Strategy::kCollective, std::move(*r)) : unavailable(Strategy::kCollective, reason);
  }

  // p2p and hybrid plans communicate up to the target without the Partial placements it creates (`mid`), then
  // partition the value in a local step.
  const Layout& communicated_target() {
    if (!mid_)  // computed once, on first use
      mid_ = csrc_.with_placements(without_created_partials(csrc_.mesh(), csrc_.placements(), cdst_.placements()));
    return *mid_;
  }

  Route with_partition(Route r) {
    const std::vector<int> created = partial_roles(csrc_.mesh(), csrc_.placements(), cdst_.placements()).created;
    if (created.empty()) return r;
    const std::vector<Placement>& mid = communicated_target().placements();
    Step part{StepKind::kLocal, created, mid, cdst_.placements(), {}, 0, 0};
    part.estimated_us =
        pricer_.collective(RankBoxes(communicated_target()), RankBoxes(cdst_), StepKind::kLocal, created).us;
    r.us += part.estimated_us;
    r.steps.push_back(detail::PricedStep{std::move(part), {}});
    return r;
  }

  Built p2p(const detail::StepPricer& pricer, Transport transport) {
    const PartialRoles roles = partial_roles(csrc_.mesh(), csrc_.placements(), cdst_.placements());
    if (roles.mixed_reduce_ops)
      return unavailable(Strategy::kP2P, "the source's Partial mesh dims mix reduce ops; a p2p step reduces one");
    const OverlapIndex& index = cache_.overlap(csrc_.placements(), communicated_target().placements());
    detail::PricedStep step = pricer.p2p(index, transport);
    if (!step.unavailable.empty()) return unavailable(Strategy::kP2P, step.unavailable);
    if (transport == Transport::kNccl && roles.contributions == 1 && detail::node_aware(index.src(), options_) &&
        index.transfer_count(detail::kMaxNodeAwareTransfers) <= detail::kMaxNodeAwareTransfers)
      detail::node_aware_step(index.all_transfers(), index.src_boxes(), index.dst_boxes(), pricer, options_, step);
    double us = step.step.estimated_us;
    return from_route(Strategy::kP2P, with_partition(Route{{std::move(step)}, us}));
  }

  // A hybrid's estimate is its route's and more (the partition step, the first step's source reads), so a route
  // search bounded by `above` bounds it.
  Built hybrid(const detail::StepPricer& pricer, Transport transport, double above, bool* costlier) {
    const Layout& mid = communicated_target();
    if (csrc_.placements() == mid.placements()) return unavailable(Strategy::kHybrid, "nothing to communicate");
    std::string reason;
    std::optional<Route> r =
        detail::best_hybrid_route(csrc_, mid, pricer, transport, options_, cache_, &reason, above, costlier);
    return r ? from_route(Strategy::kHybrid, with_partition(std::move(*r))) : unavailable(Strategy::kHybrid, reason);
  }

  const RankBoxes& boxes(const std::vector<Placement>& ps) { return cache_.boxes(ps); }

  // A built candidate's summary: its price with the first step's source reads, its steps and bytes, and with
  // `with_report` (else report() later, or the plan's pending candidates) its peak workspace, budget fit and route.
  void finish(Built& b, const detail::StepPricer& pricer, bool with_report = true) {
    b.chunk_bytes = pricer.chunk_bytes();
    if (!b.summary.available) return;
    if (options_.buffers_change && !b.steps.empty()) {  // the first step reads the caller's tensors
      detail::PricedStep& first = b.steps.front();
      const double before = first.step.estimated_us;
      pricer.price_source_reads(first, boxes(first.step.from));
      b.summary.estimated_us += first.step.estimated_us - before;
    }
    b.summary.steps = static_cast<int>(b.steps.size());
    for (const detail::PricedStep& s : b.steps) b.summary.bytes_moved += s.step.bytes_moved;
    if (with_report) report(b, pricer);
  }

  void report(Built& b, const detail::StepPricer& pricer) {
    if (!b.summary.available) return;
    b.summary.peak_workspace_bytes = workspace_peak_(b.steps, src_.mesh().size(), pricer, cache_);
    b.summary.fits_budget =
        !options_.memory_budget_bytes || b.summary.peak_workspace_bytes <= *options_.memory_budget_bytes;
    b.summary.route = detail::route_text(b.steps.size(), [&](size_t i) -> const Step& { return b.steps[i].step; });
  }

  const Built* choose(const std::vector<Built>& all) const {
    if (options_.strategy != Strategy::kAuto) {  // only the requested strategy was built, on one or two transports
      const Built* usable = nullptr;
      for (const Built& b : all)
        if (b.summary.available && (!usable || !usable->summary.fits_budget)) usable = &b;
      const Built& b = usable ? *usable : all.front();
      RESHARD_REQUIRE(b.summary.available, "strategy ", to_string(options_.strategy), " has no plan for ", src_.str(),
                      " -> [", to_string(dst_.placements()), "]: ", b.summary.reason);
      RESHARD_REQUIRE(b.summary.fits_budget, "the ", to_string(b.summary.strategy), " plan needs ",
                      b.summary.peak_workspace_bytes, " bytes of workspace per rank, over the memory budget of ",
                      *options_.memory_budget_bytes);
    }
    const Built* best = nullptr;
    Index least_workspace = std::numeric_limits<Index>::max();
    for (const Built& b : all) {
      if (!b.summary.available) continue;
      least_workspace = std::min(least_workspace, b.summary.peak_workspace_bytes);
      if (!b.summary.fits_budget) continue;
      if (!best || b.summary.estimated_us < best->summary.estimated_us) best = &b;
    }
    RESHARD_REQUIRE(best != nullptr, "no plan fits the memory budget of ", options_.memory_budget_bytes.value_or(0),
                    " bytes per rank; the smallest needs ", least_workspace);
    return best;
  }

  // Candidates are priced without keeping transfers; the chosen plan's p2p steps get theirs here: every
  // rank's for a global plan, this rank's own for a rank plan (enumerated directly, nothing quadratic).
  void materialize_transfers(std::vector<Step>& steps) {
    for (Step& s : steps) {
      if (s.kind != StepKind::kP2P) continue;
      // A global plan's steps hold at most kMaxPlanTransfers: build_strategy checked the candidate.
      const OverlapIndex& index = cache_.overlap(s.from, s.to);
      s.transfers = detail::planned_transfers(index.src(), index.dst(), options_.topology, element_size(dtype_), rank_,
                                              s.relayed, &index);
    }
  }

  const Layout& src_;
  const Layout& dst_;
  DType dtype_;
  const PlanOptions& options_;
  std::optional<int> rank_;
  bool reference_;
  CostModel model_;
  detail::StepPricer pricer_;
  Layout csrc_, cdst_;
  std::optional<Layout> mid_;  // communicated_target()
  detail::LayoutCache cache_;
  detail::WorkspacePeak workspace_peak_;
};

class PlannedAgain final : public detail::PendingCandidates {
 public:
  PlannedAgain(std::vector<Candidate> candidates, std::vector<int> incomplete, const Layout& src, const Layout& dst,
               DType dtype, const PlanOptions& options, std::optional<int> rank)
      : PendingCandidates(std::move(candidates)),
        incomplete_(std::move(incomplete)),
        src_(src),
        dst_(dst),
        dtype_(dtype),
        options_(options),
        rank_(rank) {}

 private:
  void complete(std::vector<Candidate>& candidates) override {
    Planner planner(src_, dst_, dtype_, options_, rank_, false);
    for (int i : incomplete_) {
      Candidate& c = candidates.at(static_cast<size_t>(i));
      c = planner.candidate(c.strategy, c.transport);
    }
  }

  std::vector<int> incomplete_;
  Layout src_, dst_;
  DType dtype_;
  PlanOptions options_;
  std::optional<int> rank_;
};

std::shared_ptr<detail::PendingCandidates> plan_again_later(std::vector<Candidate> candidates,
                                                            std::vector<int> incomplete, const Layout& src,
                                                            const Layout& dst, DType dtype, const PlanOptions& options,
                                                            std::optional<int> rank) {
  return std::make_shared<PlannedAgain>(std::move(candidates), std::move(incomplete), src, dst, dtype, options, rank);
}

}  // namespace

Plan make_plan(const Layout& src, const Layout& dst, DType dtype, const PlanOptions& options) {
  if (detail::needs_cross_mesh(src, dst)) return detail::make_cross_mesh_plan(src, dst, dtype, options, std::nullopt);
  return Planner(src, dst, dtype, options, std::nullopt, false).build();
}

Plan make_rank_plan(const Layout& src, const Layout& dst, DType dtype, int rank, const PlanOptions& options) {
  if (detail::needs_cross_mesh(src, dst)) return detail::make_cross_mesh_plan(src, dst, dtype, options, rank);
  return Planner(src, dst, dtype, options, rank, false).build();
}

namespace detail {

Plan make_plan_reference(const Layout& src, const Layout& dst, DType dtype, const PlanOptions& options,
                         std::optional<int> rank) {
  if (needs_cross_mesh(src, dst)) return make_cross_mesh_plan(src, dst, dtype, options, rank);
  return Planner(src, dst, dtype, options, rank, true).build();
}

}  // namespace detail

}  // namespace reshard
