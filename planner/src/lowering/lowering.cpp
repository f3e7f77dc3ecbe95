// Lowering: one rank's part of a plan as buffer-relative operations, one function per step kind (exchanges of both
// transports: exchange_lowering.cpp). The step geometry (step_geometry.hpp) says how every transfer moves and what
// scratch it takes; lowering only assigns buffer offsets, and op_schedule.cpp puts the result on lanes.
#include <algorithm>
#include <functional>

#include "lowering/exchange_lowering.hpp"
#include "lowering/lowering_parts.hpp"
#include "lowering/op_schedule.hpp"
#include "plan/node_split.hpp"
#include "plan/transitions.hpp"
#include "pricing/region_views.hpp"
#include "pricing/step_geometry.hpp"
#include "reshard/partial.hpp"

namespace reshard {
namespace detail {
namespace {

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

ReduceOp partial_op(const std::vector<Placement>& from, const std::vector<int>& dims) {
  return from[dims.front()].op();
}

// What lowering one rank's steps reads (lower_parts takes it from a plan).
struct StepsInput {
  const Layout& src;  // the plan's layouts; the steps run step_layout's chain between them
  const Layout& dst;
  const std::vector<Step>& steps;
  DType dtype, to_dtype;
  const Topology& topology;
  int rank;
  const std::vector<RankTransfers>& transfers;  // per step: the rank's transfers (p2p steps), direct ones only
  const std::vector<RankTransfers>& relays;     // per step: the rank's part of a relayed step's second phase
  Index chunk_bytes, engine_min_row_bytes;
  bool low_sm, gathers_as_exchanges;
  OneSidedCopies one_sided;
};

// Lowers a plan's steps for one rank, one method per step kind. Staged transfers are pipelined in chunks of
// chunk_bytes. Where to_dtype differs from dtype, nothing lands in the output buffer but through a copy or a
// reduction, which convert (RankProgram::output_dtype): the last step's receives are staged, its collective receives
// land in scratch.
class StepLowering {
 public:
  explicit StepLowering(const StepsInput& in)
      : in_(in), es_(element_size(in.dtype)), layouts_(chain(in)), workspace_(workspace_of(layouts_, in.rank, es_)) {}

  LoweredParts run() && {
    RankProgram& prog = out_.program;
    prog.rank = in_.rank;
    prog.dtype = in_.dtype;
    if (in_.to_dtype != in_.dtype) prog.output_dtype = in_.to_dtype;
    prog.step_count = static_cast<int>(in_.steps.size());
    out_.later.resize(in_.steps.size());
    prog.input_elements = layouts_.front().volume(in_.rank);
    prog.output_elements = layouts_.back().volume(in_.rank);
    Index scratch_peak = 0;
    for (size_t i = 0; i < in_.steps.size(); ++i) {
      Current c{i, in_.steps[i], layouts_[i], layouts_[i + 1], step_buffers(workspace_, i, in_.steps.size())};
      c.convert_here = prog.output_dtype && i + 1 == in_.steps.size();
      switch (c.step.kind) {
        case StepKind::kP2P:
          p2p(c);
          break;
        case StepKind::kAllToAll:
          c.scratch = group_exchange(c, nullptr);
          break;
        case StepKind::kLocal:
          local(c);
          break;
        case StepKind::kAllGather:
          all_gather(c);
          break;
        case StepKind::kReduceScatter:
          reduce_scatter(c);
          break;
        case StepKind::kAllReduce:
          all_reduce(c);
          break;
      }
      if (c.collective.collective) c.ps.stages.push_back(std::move(c.collective));
      auto note_groups = [&](const StepParts& ps) {
        for (const StageParts& stage : ps.stages)
          if (stage.collective) {
            const GroupSpec g = group_of(*stage.collective);
            if (std::find(prog.communicators.begin(), prog.communicators.end(), g) == prog.communicators.end())
              prog.communicators.push_back(g);
          }
      };
      note_groups(c.ps);
      for (const StepParts& phase : out_.later[i]) note_groups(phase);
      scratch_peak = std::max(scratch_peak, c.scratch);
      out_.steps.push_back(std::move(c.ps));
    }
    prog.work_elements = workspace_.total(scratch_peak);
    return std::move(out_);
  }

 private:
  // One step being lowered: its layouts' boxes and its buffers, the parts it adds, and its scratch (elements).
  struct Current {
    size_t i;
    const Step& step;
    const RankBoxes &a, &b;
    StepBuffers buf;
    bool convert_here = false;  // the step writes the output: it converts
    StepParts ps;
    StageParts collective;
    Index scratch = 0;
  };

  static std::vector<RankBoxes> chain(const StepsInput& in) {
    std::vector<RankBoxes> layouts;
    for (size_t i = 0; i < in.steps.size(); ++i) layouts.emplace_back(step_layout(in.src, in.dst, in.steps, i));
    layouts.emplace_back(in.steps.empty() ? in.src : step_layout(in.src, in.dst, in.steps, in.steps.size()));
    return layouts;
  }

  const Box& from(const Current& c) const { return c.a[in_.rank]; }
  const Box& to(const Current& c) const { return c.b[in_.rank]; }

  void p2p(Current& c) {
    const Step& step = c.step;
    const int rank = in_.rank;
    const PartialRoles roles = partial_roles(c.a.layout(), c.b.layout());
    const ExchangeRules rules{step.transport,           es_,        in_.chunk_bytes, roles.contributions > 1,
                              in_.engine_min_row_bytes, in_.low_sm, c.convert_here};
    ExchangeRules near = rules;  // one-sided parts
    near.transport = Transport::kNvlink;
    const size_t n = in_.steps.size();
    // Rank p's tensors of this step as this rank addresses them (one-sided parts). A staged step's peers read the
    // copy of the source tensor at the start of the sender's step scratch.
    const PeerTensor peer_in = [&](int p) {
      const StepBuffers theirs = step_buffers(workspace_of(layouts_, p, es_), c.i, n, p);
      return step.staged ? BufferRef{Buffer::kWork, theirs.scratch_base, p} : theirs.in;
    };
    const PeerTensor peer_out = [&](int p) { return step_buffers(workspace_of(layouts_, p, es_), c.i, n, p).out; };
    const bool push = in_.one_sided == OneSidedCopies::kPush && !step.staged;
    if (step.transport == Transport::kNvlink) {
      out_.program.one_sided = true;
      lower_one_sided(c.ps, in_.transfers.at(c.i), step.transfers, c.a, c.b, rank, c.buf, rules, roles, step.fused,
                      push, peer_in, peer_out);
      if (step.staged) {
        c.scratch = aligned_elements(staged_source_elements(c.a, rank), es_);
        if (!in_.transfers.at(c.i).sends.empty()) {
          const BufferRef copy{Buffer::kWork, c.buf.scratch_base};
          c.ps.one_sided->stage.push_back(box_copy(c.buf.in, from(c), copy, from(c), from(c)));
          c.ps.one_sided->stage_engine =
              local_copy_engine_for(from(c), from(c), from(c), es_, in_.engine_min_row_bytes, in_.low_sm);
        }
      }
    } else if (step.mixed) {  // within the node one-sided, between nodes on nccl, concurrently (op_schedule.hpp)
      out_.program.one_sided = true;
      const auto [inside, outside] = split_by_node(in_.transfers.at(c.i));
      std::vector<Transfer> inside_step;  // the step's one-sided transfers, for their issue order
      for (const Transfer& t : step.transfers)
        if (!t.is_relayed() && !t.is_local() && in_.topology.same_node(t.src, t.dst)) inside_step.push_back(t);
      c.scratch = lower_exchange(c.ps, outside, c.a, c.b, rank, c.buf, rules, &roles);
      lower_one_sided(c.ps, inside, inside_step, c.a, c.b, rank, c.buf, near, roles, false, push, peer_in, peer_out);
    } else {
      c.scratch = lower_exchange(c.ps, in_.transfers.at(c.i), c.a, c.b, rank, c.buf, rules, &roles);
    }
    if (step.relayed) {  // the second phase, from the relays' L_i+1 tensors into the receivers'
      StepParts second;
      const StepBuffers from_out{c.buf.out, c.buf.out, c.buf.scratch_base};
      if (step.mixed) {
        std::vector<Transfer> forwards;  // the step's relayed transfers, as sent by their relays
        for (const Transfer& t : step.transfers)
          if (t.is_relayed()) forwards.push_back(Transfer{t.via, t.dst, t.region, t.bytes});
        lower_one_sided(second, in_.relays.at(c.i), forwards, c.b, c.b, rank, from_out, near, roles, false, push,
                        peer_out, peer_out);
      } else {
        c.scratch =
            std::max(c.scratch, lower_exchange(second, in_.relays.at(c.i), c.b, c.b, rank, from_out, rules, nullptr));
      }
      out_.later[c.i].push_back(std::move(second));
    }
  }

  // A rank's transfers of a mixed step: those within its node (and its local copies), and those between nodes.
  std::pair<RankTransfers, RankTransfers> split_by_node(const RankTransfers& t) const {
    std::pair<RankTransfers, RankTransfers> out;
    auto& [inside, outside] = out;
    inside.local = t.local;
    for (const Transfer& s : t.sends) (in_.topology.same_node(s.src, s.dst) ? inside : outside).sends.push_back(s);
    for (const Transfer& r : t.recvs) (in_.topology.same_node(r.src, r.dst) ? inside : outside).recvs.push_back(r);
    return out;
  }

  void local(Current& c) {
    if (is_empty(to(c))) return;
    const Mesh& mesh = c.b.layout().mesh();
    const std::vector<int> created = partial_roles(mesh, c.step.from, c.step.to).created;
    const Partition part = partition_for(mesh, c.step.to, created, in_.dtype, mesh.coord_of(in_.rank));
    if (part.zero) {
      c.ps.stages.emplace_back().reduce.push_back(box_reduce({}, c.buf.out, to(c), to(c), ReduceOp::kSum, 1));
    } else if (part.divisor > 1) {
      c.ps.stages.emplace_back().reduce.push_back(
          box_reduce({{c.buf.in, from(c)}}, c.buf.out, to(c), to(c), ReduceOp::kSum, part.divisor));
    } else {
      const ExchangeRules rules{Transport::kNccl, es_, in_.chunk_bytes, false, in_.engine_min_row_bytes, in_.low_sm};
      add_local_copy(c.ps, c.buf.in, from(c), c.buf.out, to(c), to(c), rules);
    }
  }

  void all_gather(Current& c) {
    if (in_.gathers_as_exchanges) {  // every member sends each other member its box (what the gather delivers)
      c.scratch = group_exchange(c, nullptr);
      return;
    }
    const GatherGeometry g = gather_geometry(c.a, c.b, c.step.mesh_dims, in_.rank);
    const bool recv_in_place = g.recv_in_place && !c.convert_here;
    const auto [send_area, recv_area] =
        collective_areas(c, g.recv_in_place && c.convert_here ? g.chunk * static_cast<Index>(g.group.size()) : 0);
    const BufferRef send = g.send_in_place ? c.buf.in : send_area, recv = recv_in_place ? c.buf.out : recv_area;
    if (!g.send_in_place && !is_empty(from(c)))
      c.collective.pack.push_back(box_copy(c.buf.in, from(c), send, from(c), from(c)));
    if (!recv_in_place) {
      for (size_t j = 0; j < g.group.size(); ++j) {
        const Box& theirs = c.a[g.group[j]];
        Box region = intersect(theirs, to(c));
        if (is_empty(region)) continue;
        BufferRef slot{recv.buffer, recv.offset + static_cast<Index>(j) * g.chunk};
        c.collective.unpack.push_back(box_copy(slot, theirs, c.buf.out, to(c), region));
      }
    }
    c.collective.collective = CollectiveOp{StepKind::kAllGather, c.step.mesh_dims, send, recv, g.chunk, ReduceOp::kSum};
  }

  void reduce_scatter(Current& c) {
    if (const PartialRoles roles = partial_roles(c.a.layout().mesh(), c.step.from, c.step.to);
        in_.gathers_as_exchanges && !roles.mixed_reduce_ops) {  // each member's contribution to g's box, reduced by g
      c.scratch = group_exchange(c, &roles);
      return;
    }
    const ScatterGeometry s = scatter_geometry(c.a, c.b, c.step.mesh_dims, in_.rank);
    const bool recv_in_place = s.recv_in_place && !c.convert_here;
    const auto [send_area, recv_area] = collective_areas(c, s.recv_in_place && c.convert_here ? s.chunk : 0);
    const BufferRef send = s.send_in_place ? c.buf.in : send_area, recv = recv_in_place ? c.buf.out : recv_area;
    if (!s.send_in_place) {
      for (size_t j = 0; j < s.group.size(); ++j) {
        const Box& theirs = c.b[s.group[j]];
        if (is_empty(theirs)) continue;
        BufferRef slot{send.buffer, send.offset + static_cast<Index>(j) * s.chunk};
        c.collective.pack.push_back(box_copy(c.buf.in, from(c), slot, theirs, theirs));
      }
    }
    if (!recv_in_place && !is_empty(to(c)))
      c.collective.unpack.push_back(box_copy(recv, to(c), c.buf.out, to(c), to(c)));
    c.collective.collective = CollectiveOp{
        StepKind::kReduceScatter, c.step.mesh_dims, send, recv, s.chunk, partial_op(c.step.from, c.step.mesh_dims)};
  }

  void all_reduce(Current& c) {
    // Converting: reduced into scratch, then copied out (converted) by the unpack.
    const BufferRef recv = c.convert_here ? BufferRef{Buffer::kWork, c.buf.scratch_base} : c.buf.out;
    if (c.convert_here) {
      c.scratch = aligned_elements(volume(from(c)), es_);
      if (!is_empty(to(c)) && !c.step.hierarchical)
        c.collective.unpack.push_back(box_copy(recv, to(c), c.buf.out, to(c), to(c)));
    }
    const ReduceOp op = partial_op(c.step.from, c.step.mesh_dims);
    const Index n = volume(from(c));
    if (!c.step.hierarchical) {
      c.collective.collective = CollectiveOp{StepKind::kAllReduce, c.step.mesh_dims, c.buf.in, recv, n, op};
      return;
    }
    // Three stages in order on the main lane (node_split.hpp): this rank's piece reduced among the members on its
    // node (into its place in `recv`), among one member per node (in place), then gathered on the node (in place).
    const std::optional<NodeSplit> split = node_split(c.a.layout().mesh(), c.step.mesh_dims, in_.topology);
    RESHARD_REQUIRE(split && n % split->parts == 0, "internal: a hierarchical all_reduce without its node split");
    const Index piece = n / split->parts;
    if (c.step.mixed) return node_stages_one_sided(c, *split, piece, recv, op);
    const BufferRef mine{
        recv.buffer,
        recv.offset +
            piece * group_mesh(c.a.layout().mesh(), split->within).group_index(in_.rank, split->within.mesh_dims)};
    auto stage = [&](StepKind kind, const GroupSpec& g, BufferRef send, BufferRef into, Index elements) {
      StageParts s;
      s.collective = CollectiveOp{kind,         g.mesh_dims, send,
                                  into,         elements,    kind == StepKind::kAllGather ? ReduceOp::kSum : op,
                                  std::nullopt, g.split_dim, g.split_parts};
      c.ps.stages.push_back(std::move(s));
    };
    // An average averages each stage over its own members: the mean of equal groups' means (floating types only: an
    // integer average, truncated per stage, is never split).
    stage(StepKind::kReduceScatter, split->within, c.buf.in, mine, piece);
    stage(StepKind::kAllReduce, split->across, mine, mine, piece);
    stage(StepKind::kAllGather, split->within, mine, recv, piece);
    if (c.convert_here && !is_empty(to(c)))
      c.ps.stages.back().unpack.push_back(box_copy(recv, to(c), c.buf.out, to(c), to(c)));
  }

  // A hierarchical all_reduce whose node stages run one-sided (Step::mixed), in three phases among this rank's node
  // members (`recv`: where the reduced tensor lands, the output or, converting, scratch): this rank reduces its piece
  // reading every member's contribution in place; all_reduces that piece among one member per node (nccl, in place);
  // reads the other members' reduced pieces (converting: into the output, its own piece copied there too). Each
  // one-sided phase posts ready to its node members, waits for theirs, reads, then posts and awaits done.
  void node_stages_one_sided(Current& c, const NodeSplit& split, Index piece, BufferRef recv, ReduceOp op) {
    if (piece == 0) return;
    out_.program.one_sided = true;
    const Mesh view = group_mesh(c.a.layout().mesh(), split.within);
    const std::vector<int> node = view.group(in_.rank, split.within.mesh_dims);  // in group order
    std::vector<int> others;
    for (int p : node)
      if (p != in_.rank) others.push_back(p);
    auto at = [](BufferRef b, Index offset) {
      b.offset += offset;
      return b;
    };
    const auto theirs = [&](int p) { return step_buffers(workspace_of(layouts_, p, es_), c.i, in_.steps.size(), p); };
    // Rank p's reduced tensor as this rank addresses it.
    const auto peer_recv = [&](int p) {
      return c.convert_here ? BufferRef{Buffer::kWork, theirs(p).scratch_base, p} : theirs(p).out;
    };
    const Index mine = piece * view.group_index(in_.rank, split.within.mesh_dims);
    const Dims flat{piece}, unit{1};
    auto syncs = [&](OneSidedParts& o) {
      o.ready = PeerSync{SyncPhase::kReady, others, others};
      o.done = PeerSync{SyncPhase::kDone, others, others};
    };
    OneSidedParts& reduce = c.ps.one_sided.emplace();
    syncs(reduce);
    ReduceRegion r{flat, at(recv, mine), unit, {}, {}, op, op == ReduceOp::kAvg ? static_cast<Index>(node.size()) : 1};
    for (int p : node) {
      r.srcs.push_back(at(p == in_.rank ? c.buf.in : theirs(p).in, mine));
      r.src_strides.push_back(unit);
    }
    reduce.reduce.push_back(std::move(r));
    StepParts across, gather;
    const GroupSpec& g = split.across;
    across.stages.emplace_back().collective =
        CollectiveOp{StepKind::kAllReduce, g.mesh_dims, at(recv, mine), at(recv, mine), piece, op,
                     std::nullopt,         g.split_dim, g.split_parts};
    OneSidedParts& pull = gather.one_sided.emplace();
    syncs(pull);
    const BufferRef into = c.convert_here ? c.buf.out : recv;
    const bool engines = !c.convert_here && piece * es_ >= in_.engine_min_row_bytes;
    for (int p : others) {
      const Index offset = piece * view.group_index(p, split.within.mesh_dims);
      (engines ? pull.engine_copies : pull.kernel_copies)
          .push_back(CopyRegion{at(peer_recv(p), offset), at(into, offset), flat, unit, unit});
    }
    if (c.convert_here) gather.local.push_back(CopyRegion{at(recv, mine), at(c.buf.out, mine), flat, unit, unit});
    out_.later[c.i].push_back(std::move(across));
    out_.later[c.i].push_back(std::move(gather));
  }

  // The step as an exchange among the members of its mesh-dim group: an all-to-all, or a gather or reduce-scatter
  // lowered as one (`roles`: the reduce-scatter's Partial roles). Returns its scratch.
  Index group_exchange(Current& c, const PartialRoles* roles) {
    const ExchangeRules rules{Transport::kNccl,         es_,        in_.chunk_bytes, roles && roles->contributions > 1,
                              in_.engine_min_row_bytes, in_.low_sm, c.convert_here};
    return lower_exchange(c.ps, all_to_all_transfers(c.a, c.b, c.step.mesh_dims, in_.rank, es_), c.a, c.b, in_.rank,
                          c.buf, rules, roles);
  }

  // A collective's scratch (set as the step's): its send area at the start of the step's scratch, its receive area
  // after it (of `recv_elements` where given: a receive the step converts out of, instead of in place).
  std::pair<BufferRef, BufferRef> collective_areas(Current& c, Index recv_elements = 0) const {
    CollectiveScratch areas = collective_scratch(c.step.kind, c.a, c.b, c.step.mesh_dims, in_.rank);
    if (recv_elements > 0) areas.recv = recv_elements;
    c.scratch = areas.total(es_);
    return {BufferRef{Buffer::kWork, c.buf.scratch_base},
            BufferRef{Buffer::kWork, c.buf.scratch_base + aligned_elements(areas.send, es_)}};
  }

  const StepsInput& in_;
  int es_;
  std::vector<RankBoxes> layouts_;  // before each step, and after the last
  WorkspaceLayout workspace_;
  LoweredParts out_;
};

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
  const StepsInput in{plan.src(),
                      plan.dst(),
                      plan.steps(),
                      plan.dtype(),
                      plan.target_dtype(),
                      plan.topology(),
                      rank,
                      mine,
                      relays,
                      plan.pipeline_chunk_bytes(),
                      plan.copy_engine_min_row_bytes(),
                      plan.low_sm(),
                      gathers_as_exchanges,
                      one_sided};
  return StepLowering(in).run();
}

}  // namespace detail

RankProgram lower(const Plan& plan, int rank, const LowerOptions& options) {
  detail::LoweredParts parts = detail::lower_parts(plan, rank, false, options.one_sided);
  RankProgram& prog = parts.program;
  const int es = element_size(prog.dtype);
  auto schedule = [&](detail::StepParts& phase, size_t i) {
    if (plan.low_sm()) {  // beside compute: copy-engine copies in pieces (op_schedule.hpp)
      detail::split_engine_copies(phase.local_engine, es, detail::kLowSmEngineCopyBytes);
      if (phase.one_sided)
        detail::split_engine_copies(phase.one_sided->engine_copies, es, detail::kLowSmEngineCopyBytes);
    }
    detail::schedule_step(std::move(phase), static_cast<int>(i), es, options.stage_schedule, prog.ops);
  };
  for (size_t i = 0; i < parts.steps.size(); ++i) {
    schedule(parts.steps[i], i);
    for (detail::StepParts& phase : parts.later[i]) schedule(phase, i);
  }
  if (prog.output_dtype) detail::convert_on_kernels(prog);
  const Plan* plans[] = {&plan};
  detail::set_plan_facts(plans, options.one_sided, prog);
  return std::move(prog);
}

}  // namespace reshard
