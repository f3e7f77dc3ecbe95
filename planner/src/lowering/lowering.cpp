// Lowering: one rank's part of a plan as buffer-relative operations. The step geometry (step_geometry.hpp) says how
// every transfer moves and what scratch it takes; this file only assigns buffer offsets, and op_schedule.cpp puts the
// result on lanes.
#include <algorithm>
#include <functional>

#include "lowering/issue_order.hpp"
#include "lowering/lowering_parts.hpp"
#include "lowering/op_schedule.hpp"
#include "plan/transitions.hpp"
#include "pricing/region_views.hpp"
#include "pricing/step_geometry.hpp"
#include "reshard/partial.hpp"

namespace reshard {
namespace detail {
namespace {

// A rank's local copy of `region` from its `from` tensor into its `to` tensor, on the engine the step geometry picks.
void add_local_copy(StepParts& ps, BufferRef in, const Box& from, BufferRef out, const Box& to, const Box& region,
                    const ExchangeRules& rules) {
  (local_copy_engine_for(region, from, to, rules.element_size, rules.copy_engine_min_row_bytes, rules.low_sm) ==
           CopyEngine::kCopyEngine
       ? ps.local_engine
       : ps.local)
      .push_back(box_copy(in, from, out, to, region));
}

struct BoxLess {
  bool operator()(const Box& a, const Box& b) const {
    for (int i = 0; i < a.ndim(); ++i) {
      if (a.offset[i] != b.offset[i]) return a.offset[i] < b.offset[i];
      if (a.shape[i] != b.shape[i]) return a.shape[i] < b.shape[i];
    }
    return false;
  }
};

// Where a rank's tensors live in one step: its L_i tensor (input buffer or an intermediate in the workspace), its
// L_i+1 tensor, and the start of the step's scratch.
struct StepBuffers {
  BufferRef in, out;
  Index scratch_base = 0;
};

// Where rank `rank`'s tensors of step i live (`peer`: as another rank refers to them).
StepBuffers step_buffers(const WorkspaceLayout& w, size_t i, size_t steps, int peer = -1) {
  StepBuffers b;
  b.in = i == 0 ? BufferRef{Buffer::kInput, 0, peer} : BufferRef{Buffer::kWork, w.intermediate_offset(i - 1), peer};
  b.out =
      i + 1 == steps ? BufferRef{Buffer::kOutput, 0, peer} : BufferRef{Buffer::kWork, w.intermediate_offset(i), peer};
  b.scratch_base = w.scratch_base();
  return b;
}

WorkspaceLayout workspace_of(const std::vector<RankBoxes>& layouts, int rank, int element_size) {
  std::vector<Index> intermediate;
  for (size_t i = 1; i + 1 < layouts.size(); ++i) intermediate.push_back(layouts[i].volume(rank));
  return WorkspaceLayout(intermediate, element_size);
}

// A reducing rank's contributions (received and its own), one group per region, each group in sender-rank order:
// the order every backend reduces in, so that results are bitwise the same everywhere.
std::vector<std::vector<const Transfer*>> contributions(const RankTransfers& t) {
  std::vector<const Transfer*> into;
  for (const Transfer& tr : t.recvs) into.push_back(&tr);
  for (const Transfer& tr : t.local) into.push_back(&tr);
  std::stable_sort(into.begin(), into.end(), [](const Transfer* p, const Transfer* q) {
    BoxLess less;
    if (less(p->region, q->region)) return true;
    if (less(q->region, p->region)) return false;
    return p->src < q->src;
  });
  std::vector<std::vector<const Transfer*>> groups;
  for (const Transfer* tr : into) {
    if (groups.empty() || groups.back().front()->region != tr->region) groups.emplace_back();
    groups.back().push_back(tr);
  }
  return groups;
}

// A message's staging flags (StageParts::sends_staging): whether this rank's side stages it, and the peer's.
unsigned char staging(bool here, bool there) {
  return static_cast<unsigned char>((here ? kStagedHere : 0) | (there ? kStagedThere : 0));
}

// One rank's side of an exchange step on the NCCL transport: staged transfers are packed into (or received into)
// scratch areas laid out exactly as the geometry accounted them, chunk i of a pipelined transfer in stage i. When
// the step reduces Partial contributions, the receiver gets every contribution of a region into scratch and one
// reduction per chunk writes the region, reading its own contribution in place. Returns the scratch it takes.
Index lower_exchange(StepParts& ps, const RankTransfers& t, const RankBoxes& a, const RankBoxes& b, int rank,
                     const StepBuffers& buf, const ExchangeRules& rules, const PartialRoles* roles) {
  const Box &from = a[rank], &to = b[rank];
  const RankExchange account = rank_exchange(t, a, b, rank, rules, Topology{});
  StageScratch::Cursor scratch(account.scratch());
  auto stage = [&](int i) -> StageParts& {
    if (static_cast<int>(ps.stages.size()) <= i) ps.stages.resize(i + 1);
    return ps.stages[i];
  };
  auto area = [&](int i, Index n) { return BufferRef{Buffer::kWork, buf.scratch_base + scratch.take(i, n)}; };
  // One message of the exchange, chunk by chunk: straight out of (into) the rank's own tensor, or through scratch
  // with a pack (unpack) copy where this side stages it.
  auto lower_message = [&](const Transfer& tr, bool sending) {
    const Movement m =
        sending ? movement(tr.region, from, b[tr.dst], rules) : movement(tr.region, a[tr.src], to, rules);
    const bool here = sending ? m.sender_stages : m.receiver_stages;
    const bool there = sending ? m.receiver_stages : m.sender_stages;
    const BufferRef own = sending ? buf.in : buf.out;
    const Box& own_box = sending ? from : to;
    for (int i = 0; i < m.chunks; ++i) {
      const Box c = chunk_of(tr.region, m.chunks, i);
      const Index n = volume(c);
      BufferRef at{own.buffer, own.offset + local_offset(own_box, c)};
      if (here) {
        at = area(i, n);
        if (sending)
          stage(i).pack.push_back(box_copy(own, own_box, at, c, c));
        else
          stage(i).unpack.push_back(box_copy(at, c, own, own_box, c));
      }
      StageParts& s = stage(i);
      (sending ? s.sends : s.recvs).push_back(PeerTransfer{sending ? tr.dst : tr.src, at, n});
      (sending ? s.sends_staging : s.recvs_staging).push_back(staging(here, there));
    }
  };
  if (!t.sends.empty() || !t.recvs.empty()) stage(0);
  for (const Transfer& tr : t.sends) lower_message(tr, true);
  if (!rules.reduces) {
    for (const Transfer& tr : t.local) add_local_copy(ps, buf.in, from, buf.out, to, tr.region, rules);
    for (const Transfer& tr : t.recvs) lower_message(tr, false);
    return account.scratch().total();
  }
  // Reductions: the contributions of each region (received ones and the rank's own), in sender-rank order.
  const Index divisor = roles->reduce_op == ReduceOp::kAvg ? roles->contributions : 1;
  for (const std::vector<const Transfer*>& group : contributions(t)) {
    const Box& region = group.front()->region;
    const int k = movement(region, a[group.front()->src], to, rules).chunks;
    for (int i = 0; i < k; ++i) {
      const Box c = chunk_of(region, k, i);
      std::vector<std::pair<BufferRef, Box>> srcs;
      for (const Transfer* tr : group) {
        if (tr->is_local()) {
          srcs.emplace_back(buf.in, from);
        } else {
          const BufferRef at = area(i, volume(c));
          stage(i).recvs.push_back(PeerTransfer{tr->src, at, volume(c)});
          stage(i).recvs_staging.push_back(staging(true, movement(region, a[tr->src], to, rules).sender_stages));
          srcs.emplace_back(at, c);
        }
      }
      stage(i).reduce.push_back(box_reduce(srcs, buf.out, to, c, roles->reduce_op, divisor));
    }
  }
  return account.scratch().total();
}

// One rank's side of a p2p step on the NVLink transport. Pulling, it tells the ranks that read its L_i tensor that
// it is ready, waits for the ranks it reads, copies every region it receives straight out of their L_i tensors into
// its L_i+1 tensor (copy engines or one kernel, as the geometry says) or reduces their contributions in place, then
// tells its sources it is done and waits until its readers are. Pushing (`push`, steps without reductions, not
// fused), it tells its sources that its L_i+1 tensor may be written, waits for the ranks it writes, copies every
// region it sends from its L_i tensor into theirs, then tells them it is done and waits until its sources are.
// Nothing is staged. `peer_in(p)` / `peer_out(p)`: rank p's L_i / L_i+1 tensor.
template <class PeerIn, class PeerOut>
void lower_one_sided(StepParts& ps, const RankTransfers& t, const std::vector<Transfer>& step_transfers,
                     const RankBoxes& a, const RankBoxes& b, int rank, const StepBuffers& buf,
                     const ExchangeRules& rules, const PartialRoles& roles, bool fused, bool push, PeerIn peer_in,
                     PeerOut peer_out) {
  const Box &from = a[rank], &to = b[rank];
  OneSidedParts one;
  one.fused = fused;
  push = push && !fused && !rules.reduces;
  std::vector<int> readers, sources;
  for (const Transfer& tr : t.sends) readers.push_back(tr.dst);
  for (const Transfer& tr : t.recvs) sources.push_back(tr.src);
  for (std::vector<int>* v : {&readers, &sources}) {
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  }
  one.ready = push ? PeerSync{SyncPhase::kReady, sources, readers} : PeerSync{SyncPhase::kReady, readers, sources};
  one.done = push ? PeerSync{SyncPhase::kDone, readers, sources} : PeerSync{SyncPhase::kDone, sources, readers};
  if (!rules.reduces) {
    for (const Transfer& tr : t.local) add_local_copy(ps, buf.in, from, buf.out, to, tr.region, rules);
    for (size_t k : issue_order(step_transfers, rank, a.size(), push)) {
      const Transfer& tr = step_transfers[k];
      const Movement m = movement(tr.region, a[tr.src], b[tr.dst], rules);
      (m.engine == CopyEngine::kCopyEngine ? one.engine_copies : one.kernel_copies)
          .push_back(push ? box_copy(buf.in, from, peer_out(tr.dst), b[tr.dst], tr.region)
                          : box_copy(peer_in(tr.src), a[tr.src], buf.out, to, tr.region));
    }
  } else {
    // Every region's contributions, in sender-rank order, reduced straight from the senders' tensors.
    const Index divisor = roles.reduce_op == ReduceOp::kAvg ? roles.contributions : 1;
    for (const std::vector<const Transfer*>& group : contributions(t)) {
      std::vector<std::pair<BufferRef, Box>> srcs;
      for (const Transfer* tr : group) srcs.emplace_back(tr->is_local() ? buf.in : peer_in(tr->src), a[tr->src]);
      one.reduce.push_back(box_reduce(srcs, buf.out, to, group.front()->region, roles.reduce_op, divisor));
    }
  }
  ps.one_sided = std::move(one);
}

ReduceOp partial_op(const std::vector<Placement>& from, const std::vector<int>& dims) {
  return from[dims.front()].op();
}

// Lowers `steps` (from layout `src` to layout `dst`, step_layout's chain) for `rank`. `transfers[i]` holds the rank's
// transfers of step i (ignored for steps that are not p2p); staged transfers are pipelined in chunks of `chunk_bytes`.
// `to_dtype`: the target's dtype; where it differs from `dtype`, nothing lands in the output buffer but through a copy
// or a reduction, which convert (RankProgram::output_dtype): the last step's receives are staged, its collective
// receives into scratch.
LoweredParts lower_steps(const Layout& src, const Layout& dst, const std::vector<Step>& steps, DType dtype,
                         DType to_dtype, int rank, const std::vector<RankTransfers>& transfers,
                         const std::vector<RankTransfers>& relays, Index chunk_bytes,
                         Index engine_min_row_bytes, bool low_sm, bool gathers_as_exchanges, OneSidedCopies one_sided) {
  const int es = element_size(dtype);
  LoweredParts out;
  RankProgram& prog = out.program;
  prog.rank = rank;
  prog.dtype = dtype;
  const bool converts = to_dtype != dtype;
  if (converts) prog.output_dtype = to_dtype;
  prog.step_count = static_cast<int>(steps.size());
  out.relays.resize(steps.size());
  std::vector<RankBoxes> layouts;
  for (size_t i = 0; i < steps.size(); ++i) layouts.emplace_back(step_layout(src, dst, steps, i));
  layouts.emplace_back(steps.empty() ? src : step_layout(src, dst, steps, steps.size()));
  prog.input_elements = layouts.front().volume(rank);
  prog.output_elements = layouts.back().volume(rank);
  const WorkspaceLayout workspace = workspace_of(layouts, rank, es);
  const ExchangeRules local_rules{Transport::kNccl, es, chunk_bytes, false, engine_min_row_bytes, low_sm};  // kLocal
  Index scratch_peak = 0;

  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& step = steps[i];
    const RankBoxes &a = layouts[i], &b = layouts[i + 1];
    const StepBuffers buf = step_buffers(workspace, i, steps.size());
    const Box &from = a[rank], &to = b[rank];
    const bool convert_here = converts && i + 1 == steps.size();  // this step writes the output: it converts
    StepParts ps;
    StageParts collective;
    Index step_scratch = 0;
    // The step as an exchange among the members of its mesh-dim group: an all-to-all, or a gather or reduce-scatter
    // lowered as one (`roles`: the reduce-scatter's Partial roles).
    auto group_exchange = [&](const PartialRoles* roles) {
      const ExchangeRules rules{Transport::kNccl,     es,     chunk_bytes, roles && roles->contributions > 1,
                                engine_min_row_bytes, low_sm, convert_here};
      return lower_exchange(ps, all_to_all_transfers(a, b, step.mesh_dims, rank, es), a, b, rank, buf, rules, roles);
    };
    // A collective's scratch: its send area at the start of the step's scratch, its receive area after it (of
    // `recv_elements` where given: a receive the step converts out of, instead of in place).
    auto collective_areas = [&](Index recv_elements = 0) {
      CollectiveScratch areas = collective_scratch(step.kind, a, b, step.mesh_dims, rank);
      if (recv_elements > 0) areas.recv = recv_elements;
      step_scratch = areas.total(es);
      return std::pair{BufferRef{Buffer::kWork, buf.scratch_base},
                       BufferRef{Buffer::kWork, buf.scratch_base + aligned_elements(areas.send, es)}};
    };
    switch (step.kind) {
      case StepKind::kP2P: {
        const PartialRoles roles = partial_roles(a.layout(), b.layout());
        const ExchangeRules rules{step.transport,       es,     chunk_bytes, roles.contributions > 1,
                                  engine_min_row_bytes, low_sm, convert_here};
        if (step.transport == Transport::kNvlink) {
          prog.one_sided = true;
          // A staged step's peers read the copy of the source tensor at the start of the sender's step scratch.
          auto peer_in = [&](int p) {
            const StepBuffers theirs = step_buffers(workspace_of(layouts, p, es), i, steps.size(), p);
            return step.staged ? BufferRef{Buffer::kWork, theirs.scratch_base, p} : theirs.in;
          };
          auto peer_out = [&](int p) { return step_buffers(workspace_of(layouts, p, es), i, steps.size(), p).out; };
          lower_one_sided(ps, transfers.at(i), step.transfers, a, b, rank, buf, rules, roles, step.fused,
                          one_sided == OneSidedCopies::kPush && !step.staged, peer_in, peer_out);
          if (step.staged) {
            step_scratch = aligned_elements(staged_source_elements(a, rank), es);
            if (!transfers.at(i).sends.empty()) {
              const BufferRef copy{Buffer::kWork, buf.scratch_base};
              ps.one_sided->stage.push_back(box_copy(buf.in, from, copy, from, from));
              ps.one_sided->stage_engine = local_copy_engine_for(from, from, from, es, engine_min_row_bytes, low_sm);
            }
          }
        } else {
          step_scratch = lower_exchange(ps, transfers.at(i), a, b, rank, buf, rules, &roles);
        }
        if (step.relayed) {  // the second phase: an exchange from the relays' L_i+1 tensors into the receivers'
          StepParts second;
          const StepBuffers from_out{buf.out, buf.out, buf.scratch_base};
          step_scratch =
              std::max(step_scratch, lower_exchange(second, relays.at(i), b, b, rank, from_out, rules, nullptr));
          out.relays[i] = std::move(second);
        }
        break;
      }
      case StepKind::kAllToAll:
        step_scratch = group_exchange(nullptr);
        break;
      case StepKind::kLocal: {
        if (is_empty(to)) break;
        const Mesh& mesh = b.layout().mesh();
        const std::vector<int> created = partial_roles(mesh, step.from, step.to).created;
        const Partition part = partition_for(mesh, step.to, created, dtype, mesh.coord_of(rank));
        if (part.zero) {
          ps.stages.emplace_back().reduce.push_back(box_reduce({}, buf.out, to, to, ReduceOp::kSum, 1));
        } else if (part.divisor > 1) {
          ps.stages.emplace_back().reduce.push_back(
              box_reduce({{buf.in, from}}, buf.out, to, to, ReduceOp::kSum, part.divisor));
        } else {
          add_local_copy(ps, buf.in, from, buf.out, to, to, local_rules);
        }
        break;
      }
      case StepKind::kAllGather: {
        if (gathers_as_exchanges) {  // every member sends each other member its box (what the gather delivers)
          step_scratch = group_exchange(nullptr);
          break;
        }
        const GatherGeometry g = gather_geometry(a, b, step.mesh_dims, rank);
        const bool recv_in_place = g.recv_in_place && !convert_here;
        const auto [send_area, recv_area] =
            collective_areas(g.recv_in_place && convert_here ? g.chunk * static_cast<Index>(g.group.size()) : 0);
        const BufferRef send = g.send_in_place ? buf.in : send_area, recv = recv_in_place ? buf.out : recv_area;
        if (!g.send_in_place && !is_empty(from)) collective.pack.push_back(box_copy(buf.in, from, send, from, from));
        if (!recv_in_place) {
          for (size_t j = 0; j < g.group.size(); ++j) {
            const Box& theirs = a[g.group[j]];
            Box region = intersect(theirs, to);
            if (is_empty(region)) continue;
            BufferRef slot{recv.buffer, recv.offset + static_cast<Index>(j) * g.chunk};
            collective.unpack.push_back(box_copy(slot, theirs, buf.out, to, region));
          }
        }
        collective.collective = CollectiveOp{StepKind::kAllGather, step.mesh_dims, send, recv, g.chunk, ReduceOp::kSum};
        break;
      }
      case StepKind::kReduceScatter: {
        if (const PartialRoles roles = partial_roles(a.layout().mesh(), step.from, step.to);
            gathers_as_exchanges && !roles.mixed_reduce_ops) {  // each member's contribution to g's box, reduced by g
          step_scratch = group_exchange(&roles);
          break;
        }
        const ScatterGeometry s = scatter_geometry(a, b, step.mesh_dims, rank);
        const bool recv_in_place = s.recv_in_place && !convert_here;
        const auto [send_area, recv_area] = collective_areas(s.recv_in_place && convert_here ? s.chunk : 0);
        const BufferRef send = s.send_in_place ? buf.in : send_area, recv = recv_in_place ? buf.out : recv_area;
        if (!s.send_in_place) {
          for (size_t j = 0; j < s.group.size(); ++j) {
            const Box& theirs = b[s.group[j]];
            if (is_empty(theirs)) continue;
            BufferRef slot{send.buffer, send.offset + static_cast<Index>(j) * s.chunk};
            collective.pack.push_back(box_copy(buf.in, from, slot, theirs, theirs));
          }
        }
        if (!recv_in_place && !is_empty(to)) collective.unpack.push_back(box_copy(recv, to, buf.out, to, to));
        collective.collective = CollectiveOp{
            StepKind::kReduceScatter, step.mesh_dims, send, recv, s.chunk, partial_op(step.from, step.mesh_dims)};
        break;
      }
      case StepKind::kAllReduce: {
        // Converting: reduced into scratch, then copied out (converted) by the unpack.
        const BufferRef recv = convert_here ? BufferRef{Buffer::kWork, buf.scratch_base} : buf.out;
        if (convert_here) {
          step_scratch = aligned_elements(volume(from), es);
          if (!is_empty(to)) collective.unpack.push_back(box_copy(recv, to, buf.out, to, to));
        }
        collective.collective = CollectiveOp{
            StepKind::kAllReduce, step.mesh_dims, buf.in, recv, volume(from), partial_op(step.from, step.mesh_dims)};
        break;
      }
    }
    if (collective.collective) {
      ps.stages.push_back(std::move(collective));
      if (std::find(prog.communicator_dims.begin(), prog.communicator_dims.end(), step.mesh_dims) ==
          prog.communicator_dims.end())
        prog.communicator_dims.push_back(step.mesh_dims);
    }
    scratch_peak = std::max(scratch_peak, step_scratch);
    out.steps.push_back(std::move(ps));
  }
  prog.work_elements = workspace.total(scratch_peak);
  return out;
}

}  // namespace

LoweredParts lower_parts(const Plan& plan, int rank, bool gathers_as_exchanges, OneSidedCopies one_sided) {
  const Mesh& mesh = plan.src().mesh();
  RESHARD_REQUIRE(rank >= 0 && rank < mesh.world_size(), "rank ", rank, " is not in mesh ", mesh.str(), " (ranks 0..",
                  mesh.world_size() - 1, ")");
  if (plan.scope_rank())
    RESHARD_REQUIRE(*plan.scope_rank() == rank, "this plan holds only rank ", *plan.scope_rank(),
                    "'s transfers; it cannot be lowered for rank ", rank);
  std::vector<RankTransfers> mine(plan.steps().size()), relays(plan.steps().size());
  for (size_t i = 0; i < plan.steps().size(); ++i) {
    for (const Transfer& t : plan.steps()[i].transfers) {
      if (t.is_relayed()) {  // the second phase, sent by the relay: as a transfer from it
        Transfer forward = t;
        forward.src = t.via;
        forward.via = -1;
        if (t.via == rank)
          relays[i].sends.push_back(forward);
        else if (t.dst == rank)
          relays[i].recvs.push_back(forward);
      } else if (t.is_local() && t.dst == rank)
        mine[i].local.push_back(t);
      else if (!t.is_local() && t.src == rank)
        mine[i].sends.push_back(t);
      else if (!t.is_local() && t.dst == rank)
        mine[i].recvs.push_back(t);
    }
  }
  return lower_steps(plan.src(), plan.dst(), plan.steps(), plan.dtype(), plan.target_dtype(), rank, mine, relays,
                     plan.pipeline_chunk_bytes(), plan.copy_engine_min_row_bytes(), plan.low_sm(), gathers_as_exchanges,
                     one_sided);
}

}  // namespace detail

RankProgram lower(const Plan& plan, int rank, const LowerOptions& options) {
  detail::LoweredParts parts = detail::lower_parts(plan, rank, false, options.one_sided);
  RankProgram& prog = parts.program;
  const int es = element_size(prog.dtype);
  for (size_t i = 0; i < parts.steps.size(); ++i) {
    detail::StepParts& step = parts.steps[i];
    if (plan.low_sm()) {  // beside compute: copy-engine copies in pieces (op_schedule.hpp)
      detail::split_engine_copies(step.local_engine, es, detail::kLowSmEngineCopyBytes);
      if (step.one_sided) detail::split_engine_copies(step.one_sided->engine_copies, es, detail::kLowSmEngineCopyBytes);
    }
    detail::schedule_step(std::move(step), static_cast<int>(i), es, options.stage_overlap, prog.ops);
    if (parts.relays[i])
      detail::schedule_step(std::move(*parts.relays[i]), static_cast<int>(i), es, options.stage_overlap, prog.ops);
  }
  if (prog.output_dtype) detail::convert_on_kernels(prog);
  const Plan* plans[] = {&plan};
  detail::set_plan_facts(plans, options.one_sided, prog);
  return std::move(prog);
}

}  // namespace reshard
