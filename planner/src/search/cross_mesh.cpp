#include "search/cross_mesh.hpp"

#include <algorithm>
#include <limits>
#include <span>

#include "plan/cross_mesh_transfers.hpp"
#include "plan/relays.hpp"
#include "plan/route_text.hpp"
#include "pricing/step_pricing.hpp"
#include "reshard/partial.hpp"
#include "search/relayed_step.hpp"
#include "search/request_spec.hpp"

namespace reshard::detail {
namespace {

// Memory budgets pipeline exchanges in chunks down to this size (as the same-mesh planner does).
constexpr Index kMinChunkBytes = 256;

// The options' p2p transports (as the same-mesh planner offers them).
std::vector<Transport> p2p_transports(const PlanOptions& options) {
  switch (options.transport) {
    case Transport::kNccl:
      return {Transport::kNccl};
    case Transport::kNvlink:
      RESHARD_REQUIRE(options.topology.peer_access,
                      "transport nvlink needs GPUs that can address each other's memory, and the topology says "
                      "they cannot (peer access off); use --transport nccl or auto");
      return {Transport::kNvlink};
    case Transport::kAuto:
      break;
  }
  if (!options.topology.peer_access) return {Transport::kNccl};
  return {Transport::kNccl, Transport::kNvlink};
}

void validate_inputs(const Layout& src, const Layout& dst, DType dtype, const PlanOptions& options,
                     std::optional<int> rank) {
  const Mesh &ms = src.mesh(), &md = dst.mesh();
  RESHARD_REQUIRE(ms.world_size() == md.world_size(), "source mesh ", ms.str(), " and target mesh ", md.str(),
                  " are in worlds of different sizes (", ms.world_size(), " and ", md.world_size(),
                  " ranks); give both the same world size");
  RESHARD_REQUIRE(src.global_shape() == dst.global_shape(), "source shape ", to_string(src.global_shape()),
                  " and target shape ", to_string(dst.global_shape()), " differ");
  checked_mul(src.global_volume(), element_size(dtype), "tensor size in bytes");
  for (const Layout* l : {&src, &dst}) {
    RESHARD_REQUIRE(l->one_box_per_rank(), "layout ", l->str(), " does not give every rank one box");
    std::optional<ReduceOp> op;
    for (int k = 0; k < l->mesh().ndim(); ++k) {
      const Placement& p = l->placement(k);
      if (!p.is_partial() || l->mesh().dim_size(k) == 1) continue;
      require_reducible(dtype, p.op());
      RESHARD_REQUIRE(!op || *op == p.op(), l == &src ? "source" : "target", " placements [",
                      to_string(l->placements()),
                      "] mix Partial reduce ops; the order of their reductions would be ambiguous");
      op = p.op();
    }
  }
  options.topology.validate();
  RESHARD_REQUIRE(options.pipeline_chunk_bytes >= 0, "pipeline chunk bytes must be >= 0, got ",
                  options.pipeline_chunk_bytes);
  if (options.memory_budget_bytes)
    RESHARD_REQUIRE(*options.memory_budget_bytes >= 0, "memory budget must be >= 0 bytes, got ",
                    *options.memory_budget_bytes);
  if (rank)
    RESHARD_REQUIRE(*rank >= 0 && *rank < ms.world_size(), "rank ", *rank, " is not in mesh ", ms.str(), " (ranks 0..",
                    ms.world_size() - 1, ")");
}

struct Built {
  Candidate summary;
  std::vector<Step> steps;
  Index chunk_bytes = 0;
};

}  // namespace

Plan make_cross_mesh_plan(const Layout& src, const Layout& dst, DType dtype, const PlanOptions& options,
                          std::optional<int> rank) {
  validate_inputs(src, dst, dtype, options, rank);
  const int es = element_size(dtype);
  const Layout csrc = src.with_placements(canonical_placements(src.mesh(), src.placements()));
  const Layout cdst = dst.with_placements(canonical_placements(dst.mesh(), dst.placements()));
  // The p2p step delivers the target without the Partial placements it creates (`mid`); a local step on the target
  // mesh then partitions the value (partial.hpp), as a same-mesh plan does.
  const PartialRoles roles = partial_roles(csrc, cdst);
  std::vector<Placement> mid_placements = cdst.placements();
  for (int k : roles.created) mid_placements[k] = Placement::replicate();
  const Layout mid = cdst.with_placements(mid_placements);
  const RankBoxes a(csrc), m(mid), b(cdst);
  const std::vector<Transfer> all = cross_mesh_transfers(csrc, mid, options.topology, es);
  const CostModel model(options.profile, options.topology, options.low_sm);
  const std::string why = src.mesh() == dst.mesh() ? cat("mesh ", src.mesh().str(),
                                                         " is a subset of the world; collectives run on a whole one")
                                                   : std::string("source and target meshes differ");

  auto build = [&](Transport transport, Index chunk) {
    const StepPricer pricer(model, dtype, chunk, options.fusion);
    Built out;
    out.chunk_bytes = chunk;
    out.summary.strategy = Strategy::kP2P;
    out.summary.transport = transport;
    PricedStep p2p = price_listed_p2p(pricer, a, m, all, transport, roles.contributions > 1);
    if (!p2p.unavailable.empty()) {
      out.summary.reason = p2p.unavailable;
      return out;
    }
    if (transport == Transport::kNccl && roles.contributions == 1 && node_aware(csrc, options) &&
        all.size() <= kMaxNodeAwareTransfers)
      node_aware_step(all, a, m, pricer, options, p2p);
    if (options.buffers_change) pricer.price_source_reads(p2p, a);
    std::vector<Index> intermediate(a.size(), 0);
    out.steps.push_back(p2p.step);
    if (!roles.created.empty()) {
      Step part{StepKind::kLocal, roles.created, mid.placements(), cdst.placements(), {}, 0, 0};
      part.estimated_us = pricer.collective(m, b, StepKind::kLocal, roles.created).us;
      out.steps.push_back(part);
      for (int r = 0; r < a.size(); ++r) intermediate[r] = m.volume(r);
    }
    Index peak = 0;
    for (int r = 0; r < a.size(); ++r) {
      const Index one[1] = {intermediate[r]};
      const WorkspaceLayout w(std::span<const Index>(one, out.steps.size() > 1 ? 1 : 0), es);
      peak = std::max(peak, w.total(p2p.scratch[r]));
    }
    out.summary.available = true;
    out.summary.steps = static_cast<int>(out.steps.size());
    for (const Step& s : out.steps) {
      out.summary.estimated_us += s.estimated_us;
      out.summary.bytes_moved += s.bytes_moved;
    }
    out.summary.peak_workspace_bytes = checked_mul(peak, es, "the plan's peak workspace in bytes");
    out.summary.fits_budget =
        !options.memory_budget_bytes || out.summary.peak_workspace_bytes <= *options.memory_budget_bytes;
    out.summary.route = route_text(out.steps);
    return out;
  };

  std::vector<Built> built;
  for (Strategy s : {Strategy::kCollective, Strategy::kP2P, Strategy::kHybrid}) {
    if (options.strategy != Strategy::kAuto && options.strategy != s) continue;
    if (s != Strategy::kP2P) {
      Built b0;
      b0.summary.strategy = s;
      b0.summary.reason = why;
      built.push_back(b0);
      continue;
    }
    for (Transport t : p2p_transports(options)) {
      Built b1 = build(t, options.pipeline_chunk_bytes);
      // Over the memory budget: pipeline the exchange in ever smaller chunks until it fits or stops shrinking.
      if (b1.summary.available && !b1.summary.fits_budget) {
        Index chunk =
            options.pipeline_chunk_bytes > 0 ? options.pipeline_chunk_bytes / 2 : src.global_volume() * es / 2;
        for (; chunk >= kMinChunkBytes && !b1.summary.fits_budget; chunk /= 2) {
          Built smaller = build(t, chunk);
          if (smaller.summary.peak_workspace_bytes >= b1.summary.peak_workspace_bytes) break;
          b1 = std::move(smaller);
        }
      }
      built.push_back(std::move(b1));
    }
  }
  const Built* best = nullptr;
  Index least = std::numeric_limits<Index>::max();
  for (const Built& c : built) {
    if (!c.summary.available) continue;
    least = std::min(least, c.summary.peak_workspace_bytes);
    if (c.summary.fits_budget && (!best || c.summary.estimated_us < best->summary.estimated_us)) best = &c;
  }
  if (!best) {
    if (least == std::numeric_limits<Index>::max()) {  // nothing available: name the p2p reason when there is one
      const Built* named = &built.front();
      for (const Built& c : built)
        if (c.summary.strategy == Strategy::kP2P) named = &c;
      fail(ErrorKind::kInvalidArgument, cat("strategy ", to_string(named->summary.strategy), " has no plan for ",
                                            src.str(), " -> ", dst.str(), ": ", named->summary.reason));
    }
    fail(ErrorKind::kInvalidArgument, cat("no plan fits the memory budget of ", options.memory_budget_bytes.value_or(0),
                                          " bytes per rank; the smallest needs ", least));
  }
  PlanSpec spec = request_spec(src, dst, dtype, options, rank);
  spec.pipeline_chunk_bytes = best->chunk_bytes;
  spec.strategy = Strategy::kP2P;
  spec.estimated_us = best->summary.estimated_us;
  spec.bytes_moved = best->summary.bytes_moved;
  spec.peak_workspace_bytes = best->summary.peak_workspace_bytes;
  for (const Built& c : built) spec.candidates.push_back(c.summary);
  spec.steps = best->steps;
  Step& first = spec.steps.front();
  std::vector<Transfer> chosen = first.relayed ? per_node_transfers(csrc, mid, options.topology, es) : all;
  if (first.relayed) relay_transfers(chosen, options.topology);
  if (!rank) {
    first.transfers = std::move(chosen);
  } else {
    for (const Transfer& t : chosen)
      if (t.src == *rank || t.dst == *rank || t.via == *rank) first.transfers.push_back(t);
  }
  return Plan(std::move(spec));
}

}  // namespace reshard::detail
