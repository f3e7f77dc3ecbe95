// validate_plan and trusted_plan (reshard/plan.hpp): what a plan must satisfy to be run, checked on every plan that
// does not come from the planner itself.
#include <algorithm>
#include <cmath>
#include <set>

#include "plan/transitions.hpp"
#include "reshard/dtype_convert.hpp"
#include "reshard/partial.hpp"
#include "reshard/plan.hpp"
#include "reshard/rank_boxes.hpp"
#include "reshard/text.hpp"

namespace reshard {
namespace {

struct BoxLess {
  bool operator()(const Box& a, const Box& b) const {
    if (a.offset.size() != b.offset.size()) return a.offset.size() < b.offset.size();
    for (int i = 0; i < a.offset.size(); ++i) {
      if (a.offset[i] != b.offset[i]) return a.offset[i] < b.offset[i];
      if (a.shape[i] != b.shape[i]) return a.shape[i] < b.shape[i];
    }
    return false;
  }
};

struct BlockLess {
  bool operator()(const std::pair<Box, Dims>& a, const std::pair<Box, Dims>& b) const {
    if (BoxLess()(a.first, b.first)) return true;
    if (BoxLess()(b.first, a.first)) return false;
    return std::lexicographical_compare(a.second.begin(), a.second.end(), b.second.begin(), b.second.end());
  }
};

void validate_p2p(const PlanSpec& spec, size_t i, const RankBoxes& a, const RankBoxes& b) {
  const Step& step = spec.steps[i];
  const Mesh& mesh = a.layout().mesh();  // the senders' (a step between meshes keeps no Partial dim)
  const int n = a.size();                // the world's ranks
  const int es = element_size(spec.dtype);
  const PartialRoles roles = partial_roles(a.layout(), b.layout());
  RESHARD_REQUIRE(roles.created.empty(), "step ", i, " (p2p) cannot create a Partial placement: [",
                  to_string(step.from), "] -> [", to_string(step.to), "]");
  RESHARD_REQUIRE(!roles.mixed_reduce_ops, "step ", i, " (p2p) reduces mesh dims with different reduce ops");
  // Every transfer, whatever the plan's scope, is exactly the overlap of its sender's source box with its receiver's
  // target box (so every pointer the executor derives from it lies in the sender's and the receiver's tensors), moves
  // exactly that many bytes, and is the only one between its two ranks.
  std::vector<std::vector<const Transfer*>> into(n);
  // The first transfer repeating an earlier one's pair of ranks (sorted, not a tree: plans hold up to N^2 transfers).
  size_t repeated = step.transfers.size();
  {
    std::vector<std::pair<std::uint64_t, size_t>> keys;
    keys.reserve(step.transfers.size());
    for (size_t t = 0; t < step.transfers.size(); ++t) {
      const Transfer& x = step.transfers[t];
      if (x.src >= 0 && x.src < n && x.dst >= 0 && x.dst < n)
        keys.emplace_back(static_cast<std::uint64_t>(x.src) * static_cast<std::uint64_t>(n) + x.dst, t);
    }
    std::sort(keys.begin(), keys.end());
    for (size_t j = 1; j < keys.size(); ++j)
      if (keys[j].first == keys[j - 1].first && (j < 2 || keys[j - 2].first != keys[j].first))
        repeated = std::min(repeated, keys[j].second);
  }
  for (size_t t = 0; t < step.transfers.size(); ++t) {
    const Transfer& x = step.transfers[t];
    auto where = [&] { return cat("step ", i, " (p2p) transfer ", t, " (rank ", x.src, " -> ", x.dst, ")"); };
    RESHARD_REQUIRE(x.src >= 0 && x.src < n && x.dst >= 0 && x.dst < n, "step ", i, " (p2p) transfer ", t, ": rank ",
                    x.src, " -> ", x.dst, " outside the world's ", n, " ranks");
    if (spec.scope_rank)
      RESHARD_REQUIRE(x.src == *spec.scope_rank || x.dst == *spec.scope_rank || x.via == *spec.scope_rank, where(),
                      ": does not involve rank ", *spec.scope_rank, " of this rank-scoped plan");
    if (x.via != -1) {
      RESHARD_REQUIRE(step.relayed, where(), ": relayed via rank ", x.via, " in a step that does not relay");
      RESHARD_REQUIRE(x.via >= 0 && x.via < n && x.via != x.src && x.via != x.dst && x.src != x.dst, where(),
                      ": relayed via rank ", x.via, ", which is not a third rank of the world's ", n);
    }
    RESHARD_REQUIRE(x.region.ndim() == a.layout().ndim() && x.region.offset.size() == x.region.shape.size(), where(),
                    ": region has ", x.region.ndim(), " dims, the tensor ", a.layout().ndim());
    for (int d = 0; d < x.region.ndim(); ++d)
      RESHARD_REQUIRE(x.region.shape[d] > 0 && x.region.offset[d] >= 0, where(), ": region ", to_string(x.region),
                      " is empty or negative");
    RESHARD_REQUIRE(contains(a[x.src], x.region), where(), ": region ", to_string(x.region), " is not held by rank ",
                    x.src, " (", to_string(a[x.src]), ")");
    RESHARD_REQUIRE(contains(b[x.dst], x.region), where(), ": region ", to_string(x.region), " is not in rank ", x.dst,
                    "'s target ", to_string(b[x.dst]));
    RESHARD_REQUIRE(intersect(a[x.src], b[x.dst]) == x.region, where(), ": region ", to_string(x.region),
                    " is not all of rank ", x.src, "'s overlap with rank ", x.dst, "'s target");
    if (x.via >= 0 && step.mixed)
      RESHARD_REQUIRE(spec.topology.same_node(x.via, x.dst), where(), ": relayed via rank ", x.via,
                      " on another node than rank ", x.dst, "; a step that mixes transports forwards within a node");
    if (x.via >= 0)
      RESHARD_REQUIRE(contains(b[x.via], x.region), where(), ": region ", to_string(x.region), " is not in rank ",
                      x.via, "'s target ", to_string(b[x.via]), ", which relays it");
    const Index elements = volume(x.region);  // fits: the region lies in a box of the layout
    RESHARD_REQUIRE(x.bytes == checked_mul(elements, es, "transfer bytes"), where(), ": bytes ", x.bytes,
                    " != ", elements, " elements x ", es, " bytes");
    RESHARD_REQUIRE(t != repeated, where(), ": rank ", x.src, " sends to rank ", x.dst, " twice in one step");
    if (!roles.kept.empty()) {
      const Dims sender = mesh.coord_of(x.src), receiver = mesh.coord_of(x.dst);
      for (int k : roles.kept)
        RESHARD_REQUIRE(sender[k] == receiver[k], where(), ": rank ", x.src,
                        " sends its Partial contribution on mesh dim ", k, " to rank ", x.dst,
                        ", which holds another coordinate of that dim");
    }
    into[x.dst].push_back(&x);
  }
  // A relayed transfer's relay receives the same region from the same sender directly (checked where the plan holds
  // the relay's transfers: a global plan, or the relay's own).
  if (step.relayed) {
    std::vector<std::pair<std::uint64_t, const Transfer*>> direct;
    for (const Transfer& x : step.transfers)
      if (x.via < 0) direct.emplace_back(static_cast<std::uint64_t>(x.src) * static_cast<std::uint64_t>(n) + x.dst, &x);
    std::sort(direct.begin(), direct.end(), [](const auto& p, const auto& q) { return p.first < q.first; });
    for (size_t t = 0; t < step.transfers.size(); ++t) {
      const Transfer& x = step.transfers[t];
      if (x.via < 0 || (spec.scope_rank && *spec.scope_rank != x.via)) continue;
      const std::uint64_t key = static_cast<std::uint64_t>(x.src) * static_cast<std::uint64_t>(n) + x.via;
      auto at = std::lower_bound(direct.begin(), direct.end(), key,
                                 [](const auto& p, std::uint64_t k) { return p.first < k; });
      RESHARD_REQUIRE(at != direct.end() && at->first == key && at->second->region == x.region, "step ", i,
                      " (p2p) transfer ", t, " (rank ", x.src, " -> ", x.dst, ") is relayed via rank ", x.via,
                      ", which does not receive ", to_string(x.region), " from rank ", x.src, " directly");
    }
  }
  // Tiling: the regions into a rank are whole intersections of distinct source blocks with its target box (distinct
  // boxes of a layout are disjoint), and their volumes add up to the target box once per contribution. A block of a
  // Partial source is a box and the sender's coordinates on the reduced dims (one contribution). A rank-scoped plan
  // is checked for its own rank (the others' plans hold the rest).
  for (int r = 0; r < n; ++r) {
    if (spec.scope_rank && r != *spec.scope_rank) continue;
    const Box& target = b[r];
    Index covered = 0;
    // The first transfer into r repeating an earlier one's block (box and contribution), found by sorting indexes.
    const size_t m = into[r].size();
    std::vector<Dims> contributions(roles.reduced.empty() ? 0 : m);
    for (size_t j = 0; j < contributions.size(); ++j) {
      const Dims sender = mesh.coord_of(into[r][j]->src);
      for (int k : roles.reduced) contributions[j].push_back(sender[k]);
    }
    // -1, 0, 1 as block j orders before, with, after block l.
    auto compare = [&](size_t j, size_t l) {
      const Box &x = a[into[r][j]->src], &y = a[into[r][l]->src];
      if (BoxLess()(x, y)) return -1;
      if (BoxLess()(y, x)) return 1;
      if (contributions.empty()) return 0;
      const Dims &cx = contributions[j], &cy = contributions[l];
      if (std::lexicographical_compare(cx.begin(), cx.end(), cy.begin(), cy.end())) return -1;
      if (std::lexicographical_compare(cy.begin(), cy.end(), cx.begin(), cx.end())) return 1;
      return 0;
    };
    std::vector<size_t> order(m);
    for (size_t j = 0; j < m; ++j) order[j] = j;
    std::sort(order.begin(), order.end(), [&](size_t j, size_t l) {
      const int c = compare(j, l);
      return c != 0 ? c < 0 : j < l;
    });
    size_t repeated_block = m;
    for (size_t j = 1; j < m; ++j)
      if (compare(order[j - 1], order[j]) == 0 && (j < 2 || compare(order[j - 2], order[j]) != 0))
        repeated_block = std::min(repeated_block, order[j]);
    for (size_t j = 0; j < into[r].size(); ++j) {
      const Transfer* x = into[r][j];
      const Box& from = a[x->src];
      if (j == repeated_block) {
        const Dims sender = mesh.coord_of(x->src);
        Dims contribution;
        for (int k : roles.reduced) contribution.push_back(sender[k]);
        fail(ErrorKind::kInvalidArgument,
             cat("step ", i, " (p2p): rank ", r, " receives block ", to_string(from),
                 roles.reduced.empty() ? "" : cat(" contribution ", to_list_string(contribution)), " twice"));
      }
      covered = checked_add(covered, volume(x->region), "elements received");
    }
    const Index needed = checked_mul(volume(target), roles.contributions, "elements to receive");
    RESHARD_REQUIRE(covered == needed, "step ", i, " (p2p): transfers into rank ", r, " cover ", covered, " of its ",
                    volume(target), " elements",
                    roles.contributions > 1 ? cat(" x ", roles.contributions, " contributions") : std::string());
  }
}

// Estimates are times in microseconds: finite and non-negative (profiles are range-checked so that the cost model
// never overflows; a plan from a file may still hold anything). `what()` names the figure (built only on failure).
template <class What>
void check_estimate(double us, const What& what) {
  RESHARD_REQUIRE(std::isfinite(us) && us >= 0, what(), " estimate ", us, " us is not a finite time >= 0");
}

template <class What>
void check_count(Index v, const What& what) {
  RESHARD_REQUIRE(v >= 0, what(), " must be >= 0, got ", v);
}

// Summary figures are derived from the steps; whatever their source, they must be finite and non-negative.
void validate_metadata(const PlanSpec& spec) {
  check_estimate(spec.estimated_us, [] { return "the plan's"; });
  check_count(spec.bytes_moved, [] { return "the plan's bytes moved"; });
  check_count(spec.peak_workspace_bytes, [] { return "the plan's peak workspace"; });
  check_count(spec.pipeline_chunk_bytes, [] { return "pipeline chunk bytes"; });
  if (spec.memory_budget_bytes) check_count(*spec.memory_budget_bytes, [] { return "the memory budget"; });
  for (size_t i = 0; i < spec.steps.size(); ++i) {
    check_estimate(spec.steps[i].estimated_us, [&] { return cat("step ", i, "'s"); });
    check_count(spec.steps[i].bytes_moved, [&] { return cat("step ", i, "'s bytes moved"); });
  }
  for (size_t i = 0; i < spec.candidates.size(); ++i) {
    const Candidate& c = spec.candidates[i];
    auto name = [&] { return cat("candidate ", i, " (", to_string(c.strategy), ")"); };
    check_estimate(c.estimated_us, [&] { return name() + "'s"; });
    check_count(c.steps, [&] { return name() + "'s step count"; });
    check_count(c.bytes_moved, [&] { return name() + "'s bytes moved"; });
    check_count(c.peak_workspace_bytes, [&] { return name() + "'s peak workspace"; });
  }
}

}  // namespace

void validate_conversion(const Layout& dst, DType dtype, DType to_dtype) {
  require_convertible(dtype, to_dtype);
  for (int k = 0; k < dst.mesh().ndim(); ++k)
    RESHARD_REQUIRE(!dst.placement(k).is_partial() || dst.mesh().dim_size(k) == 1, "cannot convert ", to_string(dtype),
                    " to ", to_string(to_dtype), " into a Partial target (mesh dim ", k,
                    "): its contributions would be converted one by one, and their sum is not the converted value");
}

void validate_plan(const PlanSpec& spec) {
  // Step 0 starts on the source mesh; every later layout is on the target mesh (the same one unless the plan moves
  // the tensor between meshes, which only its first step, a p2p one, does).
  const Mesh& mesh = spec.dst.mesh();
  const bool cross = !(spec.src.mesh() == spec.dst.mesh());
  RESHARD_REQUIRE(spec.src.mesh().world_size() == mesh.world_size(), "source mesh ", spec.src.mesh().str(),
                  " and target mesh ", mesh.str(), " are in worlds of different sizes (", spec.src.mesh().world_size(),
                  " and ", mesh.world_size(), " ranks)");
  RESHARD_REQUIRE(spec.src.global_shape() == spec.dst.global_shape(), "source shape ",
                  to_string(spec.src.global_shape()), " and target shape ", to_string(spec.dst.global_shape()),
                  " differ");
  spec.topology.validate();
  for (const Layout* l : {&spec.src, &spec.dst})
    for (int k = 0; k < l->mesh().ndim(); ++k)
      if (l->placement(k).is_partial() && l->mesh().dim_size(k) > 1)
        require_reducible(spec.dtype, l->placement(k).op());
  if (spec.scope_rank)
    RESHARD_REQUIRE(*spec.scope_rank >= 0 && *spec.scope_rank < mesh.world_size(), "plan rank ", *spec.scope_rank,
                    " is not in mesh ", mesh.str(), " (ranks 0..", mesh.world_size() - 1, ")");
  RESHARD_REQUIRE(!spec.steps.empty(), "a plan needs at least one step");
  RESHARD_REQUIRE(static_cast<Index>(spec.steps.size()) <= kMaxPlanRankSteps / mesh.world_size(), "a plan of ",
                  spec.steps.size(), " steps on ", mesh.world_size(), " ranks is more than ", kMaxPlanRankSteps,
                  " rank-steps to check (steps x ranks)");
  checked_mul(spec.src.global_volume(), element_size(spec.dtype), "tensor size in bytes");
  if (spec.to_dtype) validate_conversion(spec.dst, spec.dtype, *spec.to_dtype);
  validate_metadata(spec);
  RESHARD_REQUIRE(spec.pipeline_chunk_bytes >= 0, "pipeline chunk bytes must be >= 0, got ", spec.pipeline_chunk_bytes);
  RESHARD_REQUIRE(spec.copy_engine_min_row_bytes >= 0, "copy-engine minimum row bytes must be >= 0, got ",
                  spec.copy_engine_min_row_bytes);
  RESHARD_REQUIRE(spec.strategy != Strategy::kAuto, "a plan's strategy is the one chosen: collective, p2p or hybrid");
  auto canon = [&](const Layout& on, const std::vector<Placement>& p) {
    const Mesh& m = on.mesh();
    RESHARD_REQUIRE(static_cast<int>(p.size()) == m.ndim(), p.size(), " placements given for a ", m.ndim(), "-D mesh ",
                    m.str());
    return canonical_placements(m, on.with_placements(p).placements());
  };
  std::vector<Placement> current = canon(spec.src, spec.src.placements());
  for (size_t i = 0; i < spec.steps.size(); ++i) {
    const Step& s = spec.steps[i];
    const Layout& before = i == 0 ? spec.src : spec.dst;
    std::vector<Placement> from = canon(before, s.from), to = canon(spec.dst, s.to);
    RESHARD_REQUIRE(from == current, "step ", i, " starts from [", to_string(s.from), "] but the previous layout is [",
                    to_string(current), "]");
    if (cross && i == 0)
      RESHARD_REQUIRE(s.kind == StepKind::kP2P, "step 0 (", to_string(s.kind), ") moves the tensor from mesh ",
                      spec.src.mesh().str(), " to mesh ", mesh.str(), "; only a p2p step can");
    Layout a = before.with_placements(s.from), b = spec.dst.with_placements(s.to);
    RESHARD_REQUIRE(!is_communication(s.kind) || s.kind == StepKind::kP2P || mesh.world_size() == mesh.size(), "step ",
                    i, " (", to_string(s.kind), "): mesh ", mesh.str(),
                    " is a subset of the world; only p2p and local steps run on it");
    RESHARD_REQUIRE(s.transport != Transport::kAuto, "step ", i, ": a step's transport is nccl or nvlink, not auto");
    RESHARD_REQUIRE(!s.fused || s.transport == Transport::kNvlink, "step ", i, ": only nvlink steps can be fused");
    RESHARD_REQUIRE(!s.staged || (i == 0 && s.kind == StepKind::kP2P && s.transport == Transport::kNvlink), "step ", i,
                    ": only a first step that is p2p on nvlink can be staged");
    RESHARD_REQUIRE(!s.staged || spec.buffers_change, "step ", i,
                    " is staged, but the plan is not for changing buffers (buffers_change)");
    if (s.transport == Transport::kNvlink) {
      RESHARD_REQUIRE(s.kind == StepKind::kP2P, "step ", i, " (", to_string(s.kind),
                      "): only p2p steps run on nvlink; collectives run on nccl");
      RESHARD_REQUIRE(spec.topology.peer_access, "step ", i,
                      " runs on nvlink, but the plan's topology has no peer access between GPUs");
      for (const Transfer& t : s.transfers)
        RESHARD_REQUIRE(spec.topology.same_node(t.src, t.dst), "step ", i, " runs on nvlink, but rank ", t.src,
                        " sends to rank ", t.dst, " on another node (", spec.topology.ranks_per_node,
                        " ranks per node)");
    }
    if (s.mixed) {
      const bool node_stages = s.kind == StepKind::kAllReduce && s.hierarchical;
      RESHARD_REQUIRE(
          (s.kind == StepKind::kP2P || node_stages) && s.transport == Transport::kNccl && !s.staged && !s.fused,
          "step ", i,
          ": only p2p steps on nccl (not staged, not fused) and hierarchical all_reduce steps mix "
          "transports");
      RESHARD_REQUIRE(spec.topology.peer_access, "step ", i,
                      " mixes transports, but the plan's topology has no peer access between GPUs");
      RESHARD_REQUIRE(node_stages || partial_roles(a, b).contributions == 1, "step ", i,
                      " reduces Partial contributions; a p2p step that reduces does not mix transports");
    }
    // Whether its groups split by node is the pricing's check (a loaded plan is priced as written).
    RESHARD_REQUIRE(!s.hierarchical || s.kind == StepKind::kAllReduce, "step ", i, " (", to_string(s.kind),
                    ") is hierarchical: only an all_reduce runs hierarchically");
    if (s.relayed) {
      RESHARD_REQUIRE(s.kind == StepKind::kP2P && s.transport == Transport::kNccl, "step ", i,
                      ": only p2p steps on nccl relay");
      RESHARD_REQUIRE(partial_roles(a, b).contributions == 1, "step ", i,
                      " reduces Partial contributions; a step that reduces does not relay");
      RESHARD_REQUIRE(!spec.to_dtype || i + 1 < spec.steps.size(), "step ", i,
                      " converts the dtype as it writes the target; a step that converts does not relay");
    }
    if (s.kind == StepKind::kP2P) {
      RESHARD_REQUIRE(s.mesh_dims.empty(), "step ", i, " (p2p) must not name mesh dims");
      validate_p2p(spec, i, RankBoxes(a), RankBoxes(b));
    } else {
      RESHARD_REQUIRE(s.transfers.empty(), "step ", i, " (", to_string(s.kind), ") must not list transfers");
      std::set<int> seen;
      for (int k : s.mesh_dims)
        RESHARD_REQUIRE(k >= 0 && k < mesh.ndim() && seen.insert(k).second, "step ", i, " (", to_string(s.kind),
                        "): mesh dim ", k, " is out of range or repeated");
      if (s.kind == StepKind::kLocal && s.mesh_dims.empty()) {
        RESHARD_REQUIRE(from == to, "step ", i, " (local) with no mesh dims must keep the placements");
      } else {
        RESHARD_REQUIRE(!s.mesh_dims.empty(), "step ", i, " (", to_string(s.kind), ") needs mesh dims");
        std::optional<StepKind> kind = detail::transition_kind(from, to, s.mesh_dims);
        RESHARD_REQUIRE(kind && *kind == s.kind, "step ", i, ": [", to_string(s.from), "] -> [", to_string(s.to),
                        "] on mesh dims is not a ", to_string(s.kind));
        RESHARD_REQUIRE(detail::transition_valid(a, b, s.kind, s.mesh_dims), "step ", i, ": ", to_string(s.kind),
                        " cannot produce [", to_string(s.to), "] from [", to_string(s.from),
                        "] (some rank needs data from outside its group)");
      }
    }
    current = to;
  }
  RESHARD_REQUIRE(current == canon(spec.dst, spec.dst.placements()), "the last step ends at [", to_string(current),
                  "], not the target [", to_string(spec.dst.placements()), "]");
  // The strategy names the steps: a collective plan has no p2p step, a p2p plan no collective one (hybrids mix them).
  for (size_t i = 0; i < spec.steps.size(); ++i) {
    const StepKind k = spec.steps[i].kind;
    const bool p2p = k == StepKind::kP2P, collective = k != StepKind::kP2P && k != StepKind::kLocal;
    RESHARD_REQUIRE(
        !(spec.strategy == Strategy::kCollective && p2p) && !(spec.strategy == Strategy::kP2P && collective), "step ",
        i, " is ", to_string(k), " but the plan's strategy is ", to_string(spec.strategy),
        ": a collective plan has no p2p step and a p2p plan no collective one");
  }
  // A hybrid plan mixes them: a p2p step, and a collective step or a local step before the p2p step (its pre steps).
  if (spec.strategy == Strategy::kHybrid) {
    bool p2p = false, mixed = false;
    for (const Step& s : spec.steps) {
      mixed = mixed || (s.kind != StepKind::kP2P && s.kind != StepKind::kLocal) || (s.kind == StepKind::kLocal && !p2p);
      p2p = p2p || s.kind == StepKind::kP2P;
    }
    RESHARD_REQUIRE(p2p && mixed, "the plan's strategy is hybrid, but its steps make a ", p2p ? "p2p" : "collective",
                    " plan: a hybrid plan has a p2p step and a collective step, or a local step before the p2p one");
  }
}

// What validate_plan checks beyond the planner's own input checks and the structure of its steps, in the same order
// (so that both planners raise the same error): figures a profile sets, and reductions the dtype supports.
Plan detail::trusted_plan(PlanSpec spec, std::shared_ptr<PendingCandidates> pending) {
  for (const Layout* l : {&spec.src, &spec.dst})
    for (int k = 0; k < l->mesh().ndim(); ++k)
      if (l->placement(k).is_partial() && l->mesh().dim_size(k) > 1)
        require_reducible(spec.dtype, l->placement(k).op());
  if (spec.to_dtype) validate_conversion(spec.dst, spec.dtype, *spec.to_dtype);
  validate_metadata(spec);
  RESHARD_REQUIRE(spec.copy_engine_min_row_bytes >= 0, "copy-engine minimum row bytes must be >= 0, got ",
                  spec.copy_engine_min_row_bytes);
  if (pending) spec.candidates.clear();
  return Plan(std::move(spec), std::move(pending), Plan::Trusted{});
}

}  // namespace reshard
