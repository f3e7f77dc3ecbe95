#include <algorithm>

#include "chunking.hpp"
#include "lowering_core.hpp"
#include "reshard/partial.hpp"
#include "step_pricing.hpp"
#include "transitions.hpp"

namespace reshard {
namespace detail {
namespace {

// Merges adjacent dims that are contiguous in every view and drops extent-1 dims; the innermost dim ends up with
// stride 1 in every view (a run of one element when needed), so kernels move rows.
void simplify_views(Dims& shape, std::vector<Dims*> strides) {
  Dims out_shape;
  std::vector<Dims> out(strides.size());
  for (int i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    if (out_shape.size() > 0) {
      const int j = out_shape.size() - 1;
      bool merge = true;
      for (size_t v = 0; v < strides.size(); ++v) merge = merge && out[v][j] == (*strides[v])[i] * shape[i];
      if (merge) {
        out_shape[j] *= shape[i];
        for (size_t v = 0; v < strides.size(); ++v) out[v][j] = (*strides[v])[i];
        continue;
      }
    }
    out_shape.push_back(shape[i]);
    for (size_t v = 0; v < strides.size(); ++v) out[v].push_back((*strides[v])[i]);
  }
  bool unit = out_shape.size() > 0;
  for (size_t v = 0; v < strides.size() && unit; ++v) unit = out[v][out_shape.size() - 1] == 1;
  if (!unit) {
    out_shape.push_back(1);
    for (Dims& o : out) o.push_back(1);
  }
  shape = out_shape;
  for (size_t v = 0; v < strides.size(); ++v) *strides[v] = out[v];
}

CopyRegion simplified(CopyRegion r) {
  simplify_views(r.shape, {&r.src_strides, &r.dst_strides});
  return r;
}

// Copy of `region` (global coordinates) from a tensor holding box `from` to one holding box `to`.
CopyRegion box_copy(BufferRef src, const Box& from, BufferRef dst, const Box& to, const Box& region) {
  src.offset += local_offset(from, region);
  dst.offset += local_offset(to, region);
  return simplified(CopyRegion{src, dst, region.shape, row_major_strides(from.shape), row_major_strides(to.shape)});
}

// Reduction of `region` from tensors holding boxes `froms` into one holding box `to`.
ReduceRegion box_reduce(const std::vector<std::pair<BufferRef, Box>>& srcs, BufferRef dst, const Box& to,
                        const Box& region, ReduceOp op, Index divisor) {
  ReduceRegion r;
  r.shape = region.shape;
  r.dst = BufferRef{dst.buffer, dst.offset + local_offset(to, region)};
  r.dst_strides = row_major_strides(to.shape);
  for (const auto& [ref, from] : srcs) {
    r.srcs.push_back(BufferRef{ref.buffer, ref.offset + local_offset(from, region)});
    r.src_strides.push_back(row_major_strides(from.shape));
  }
  r.op = op;
  r.divisor = divisor;
  std::vector<Dims*> views{&r.dst_strides};
  for (Dims& d : r.src_strides) views.push_back(&d);
  simplify_views(r.shape, views);
  return r;
}

// Hands out aligned areas of a collective step's scratch space (sizes as StepPricer accounts them).
class Scratch {
 public:
  Scratch(Index base, int element_size) : base_(base), next_(base), es_(element_size) {}
  BufferRef take(Index elements) {
    BufferRef r{Buffer::kWork, next_};
    next_ += aligned_elements(elements, es_);
    return r;
  }
  Index used() const { return next_ - base_; }

 private:
  Index base_, next_;
  int es_;
};

struct BoxLess {
  bool operator()(const Box& a, const Box& b) const {
    for (int i = 0; i < a.ndim(); ++i) {
      if (a.offset[i] != b.offset[i]) return a.offset[i] < b.offset[i];
      if (a.shape[i] != b.shape[i]) return a.shape[i] < b.shape[i];
    }
    return false;
  }
};

// Lowers an exchange (p2p or all_to_all) from the transfers involving this rank. Transfers that need copying are
// cut into pipeline chunks and their scratch laid out stage by stage (chunking.hpp); both peers cut alike. When
// `roles` reduces Partial contributions, the receiver gets every contribution of a region into scratch and one
// reduction per chunk writes the region, reading its own contribution in place.
struct ExchangeSide {
  const RankBoxes& a;
  const RankBoxes& b;
  int rank;
  BufferRef in, out;
  Index scratch_base;
  int es;
  Index chunk_bytes;
  const PartialRoles* roles;  // p2p steps: reduced dims; null for all_to_all
};

// Returns the scratch the step takes (elements).
Index lower_exchange(ProgramStep& ps, const RankTransfers& t, const ExchangeSide& x) {
  const Box &from = x.a[x.rank], &to = x.b[x.rank];
  const bool reduces = x.roles && x.roles->contributions > 1;
  auto stage = [&](int i) -> Stage& {
    if (static_cast<int>(ps.stages.size()) <= i) ps.stages.resize(i + 1);
    return ps.stages[i];
  };
  auto chunks = [&](const Transfer& tr) {
    return chunk_count(tr.region, x.a[tr.src], x.b[tr.dst], x.es, x.chunk_bytes, reduces);
  };
  auto packs = [&](const Transfer& tr) { return !is_contiguous_in(from, tr.region); };
  auto copies_out = [&](const Transfer& tr) { return reduces || !is_contiguous_in(to, tr.region); };
  // Pass 1: scratch per stage, as the planner prices it.
  StageScratch need(x.es);
  for (const Transfer& tr : t.sends)
    if (packs(tr)) need.add_chunks(tr.region, chunks(tr));
  for (const Transfer& tr : t.recvs)
    if (copies_out(tr)) need.add_chunks(tr.region, chunks(tr));
  std::vector<Index> cursor;
  auto take = [&](int i, Index n) {
    if (static_cast<int>(cursor.size()) <= i) cursor.resize(i + 1, 0);
    BufferRef r{Buffer::kWork, x.scratch_base + need.stage_offset(i) + cursor[i]};
    cursor[i] += aligned_elements(n, x.es);
    return r;
  };
  if (!t.sends.empty() || !t.recvs.empty()) stage(0);
  for (const Transfer& tr : t.sends) {
    const int k = chunks(tr);
    for (int i = 0; i < k; ++i) {
      Box c = chunk_of(tr.region, k, i);
      Index n = volume(c);
      if (!packs(tr)) {
        stage(i).sends.push_back(PeerTransfer{tr.dst, BufferRef{x.in.buffer, x.in.offset + local_offset(from, c)}, n});
      } else {
        BufferRef area = take(i, n);
        stage(i).pack.push_back(box_copy(x.in, from, area, c, c));
        stage(i).sends.push_back(PeerTransfer{tr.dst, area, n});
      }
    }
  }
  if (!reduces) {
    for (const Transfer& tr : t.local) ps.local.push_back(box_copy(x.in, from, x.out, to, tr.region));
    for (const Transfer& tr : t.recvs) {
      const int k = chunks(tr);
      for (int i = 0; i < k; ++i) {
        Box c = chunk_of(tr.region, k, i);
        Index n = volume(c);
        if (!copies_out(tr)) {
          stage(i).recvs.push_back(
              PeerTransfer{tr.src, BufferRef{x.out.buffer, x.out.offset + local_offset(to, c)}, n});
        } else {
          BufferRef area = take(i, n);
          stage(i).unpack.push_back(box_copy(area, c, x.out, to, c));
          stage(i).recvs.push_back(PeerTransfer{tr.src, area, n});
        }
      }
    }
    return need.total();
  }
  // Reductions: the contributions of each region (received ones and the rank's own), in sender-rank order.
  std::vector<const Transfer*> into;
  for (const Transfer& tr : t.recvs) into.push_back(&tr);
  for (const Transfer& tr : t.local) into.push_back(&tr);
  std::stable_sort(into.begin(), into.end(), [](const Transfer* p, const Transfer* q) {
    BoxLess less;
    if (less(p->region, q->region)) return true;
    if (less(q->region, p->region)) return false;
    return p->src < q->src;
  });
  const Index divisor = x.roles->reduce_op == ReduceOp::kAvg ? x.roles->contributions : 1;
  for (size_t g = 0; g < into.size();) {
    size_t e = g;
    while (e < into.size() && into[e]->region == into[g]->region) ++e;
    const Box& region = into[g]->region;
    const int k = chunks(*into[g]);
    for (int i = 0; i < k; ++i) {
      Box c = chunk_of(region, k, i);
      std::vector<std::pair<BufferRef, Box>> srcs;
      for (size_t j = g; j < e; ++j) {
        if (into[j]->is_local()) {
          srcs.emplace_back(x.in, from);
        } else {
          BufferRef area = take(i, volume(c));
          stage(i).recvs.push_back(PeerTransfer{into[j]->src, area, volume(c)});
          srcs.emplace_back(area, c);
        }
      }
      stage(i).reduce.push_back(box_reduce(srcs, x.out, to, c, x.roles->reduce_op, divisor));
    }
    g = e;
  }
  return need.total();
}
// The transfers of an all_to_all among the rank's group: region a(r) ∩ b(g) to each member g.
RankTransfers all_to_all_transfers(const RankBoxes& a, const RankBoxes& b, const std::vector<int>& dims, int rank) {
  RankTransfers t;
  const Box &mine_a = a[rank], &mine_b = b[rank];
  for (int g : a.layout().mesh().group(rank, dims)) {
    Box out = intersect(mine_a, b[g]);
    Box in = intersect(a[g], mine_b);
    if (g == rank) {
      if (!is_empty(out)) t.local.push_back(Transfer{rank, rank, out, 0});
      continue;
    }
    if (!is_empty(out)) t.sends.push_back(Transfer{rank, g, out, 0});
    if (!is_empty(in)) t.recvs.push_back(Transfer{g, rank, in, 0});
  }
  return t;
}

ReduceOp partial_op(const std::vector<Placement>& from, const std::vector<int>& dims) {
  return from[dims.front()].op();
}

}  // namespace

std::vector<std::vector<RankTransfers>> index_transfers(const std::vector<Step>& steps, int nranks) {
  std::vector<std::vector<RankTransfers>> index(steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].kind != StepKind::kP2P) continue;
    index[i].resize(nranks);
    for (const Transfer& t : steps[i].transfers) {
      if (t.is_local()) {
        index[i][t.dst].local.push_back(t);
      } else {
        index[i][t.src].sends.push_back(t);
        index[i][t.dst].recvs.push_back(t);
      }
    }
  }
  return index;
}

RankProgram lower_steps(const Layout& src, const std::vector<Step>& steps, DType dtype, int rank,
                        const std::vector<RankTransfers>& transfers, Index chunk_bytes) {
  const int es = element_size(dtype);
  const Mesh& mesh = src.mesh();
  RankProgram prog;
  prog.rank = rank;
  prog.dtype = dtype;
  std::vector<RankBoxes> layouts;
  for (const Step& s : steps) layouts.emplace_back(src.with_placements(s.from));
  layouts.emplace_back(steps.empty() ? src : src.with_placements(steps.back().to));
  prog.input_elements = layouts.front().volume(rank);
  prog.output_elements = layouts.back().volume(rank);

  // Two intermediate tensors, used alternately by steps 0..k-2 as outputs.
  const size_t k = steps.size();
  Index temp[2] = {0, 0};
  for (size_t i = 0; i + 1 < k; ++i) temp[i % 2] = std::max(temp[i % 2], layouts[i + 1].volume(rank));
  const Index temp_offset[2] = {0, aligned_elements(temp[0], es)};
  const Index scratch_base = temp_offset[1] + aligned_elements(temp[1], es);
  Index scratch_peak = 0;

  for (size_t i = 0; i < k; ++i) {
    const Step& step = steps[i];
    const RankBoxes &a = layouts[i], &b = layouts[i + 1];
    BufferRef in = i == 0 ? BufferRef{Buffer::kInput, 0} : BufferRef{Buffer::kWork, temp_offset[(i - 1) % 2]};
    BufferRef out = i + 1 == k ? BufferRef{Buffer::kOutput, 0} : BufferRef{Buffer::kWork, temp_offset[i % 2]};
    const Box &from = a[rank], &to = b[rank];
    Scratch scratch(scratch_base, es);
    Index exchange_scratch = 0;
    ProgramStep ps;
    ps.kind = step.kind;
    Stage collective_stage;
    switch (step.kind) {
      case StepKind::kP2P: {
        const PartialRoles roles = partial_roles(mesh, step.from, step.to);
        exchange_scratch = lower_exchange(ps, transfers.at(i),
                                          ExchangeSide{a, b, rank, in, out, scratch_base, es, chunk_bytes, &roles});
        break;
      }
      case StepKind::kAllToAll:
        exchange_scratch = lower_exchange(ps, all_to_all_transfers(a, b, step.mesh_dims, rank),
                                          ExchangeSide{a, b, rank, in, out, scratch_base, es, chunk_bytes, nullptr});
        break;
      case StepKind::kLocal: {
        if (is_empty(to)) break;
        const std::vector<int> created = partial_roles(mesh, step.from, step.to).created;
        const Partition part = partition_for(mesh, step.to, created, dtype, mesh.coord_of(rank));
        if (part.zero) {
          ps.stages.emplace_back().reduce.push_back(box_reduce({}, out, to, to, ReduceOp::kSum, 1));
        } else if (part.divisor > 1) {
          ps.stages.emplace_back().reduce.push_back(
              box_reduce({{in, from}}, out, to, to, ReduceOp::kSum, part.divisor));
        } else {
          ps.local.push_back(box_copy(in, from, out, to, to));
        }
        break;
      }
      case StepKind::kAllGather: {
        GatherGeometry g = gather_geometry(a, b, step.mesh_dims, rank);
        BufferRef send = in;
        if (!g.send_in_place) {
          send = scratch.take(g.chunk);
          if (!is_empty(from)) collective_stage.pack.push_back(box_copy(in, from, send, from, from));
        }
        BufferRef recv = out;
        if (!g.recv_in_place) {
          recv = scratch.take(g.chunk * static_cast<Index>(g.group.size()));
          for (size_t j = 0; j < g.group.size(); ++j) {
            const Box& theirs = a[g.group[j]];
            Box region = intersect(theirs, to);
            if (is_empty(region)) continue;
            BufferRef slot{recv.buffer, recv.offset + static_cast<Index>(j) * g.chunk};
            collective_stage.unpack.push_back(box_copy(slot, theirs, out, to, region));
          }
        }
        collective_stage.collective =
            CollectiveOp{StepKind::kAllGather, step.mesh_dims, send, recv, g.chunk, ReduceOp::kSum};
        break;
      }
      case StepKind::kReduceScatter: {
        ScatterGeometry s = scatter_geometry(a, b, step.mesh_dims, rank);
        BufferRef send = in;
        if (!s.send_in_place) {
          send = scratch.take(s.chunk * static_cast<Index>(s.group.size()));
          for (size_t j = 0; j < s.group.size(); ++j) {
            const Box& theirs = b[s.group[j]];
            if (is_empty(theirs)) continue;
            BufferRef slot{send.buffer, send.offset + static_cast<Index>(j) * s.chunk};
            collective_stage.pack.push_back(box_copy(in, from, slot, theirs, theirs));
          }
        }
        BufferRef recv = out;
        if (!s.recv_in_place) {
          recv = scratch.take(s.chunk);
          if (!is_empty(to)) collective_stage.unpack.push_back(box_copy(recv, to, out, to, to));
        }
        collective_stage.collective = CollectiveOp{
            StepKind::kReduceScatter, step.mesh_dims, send, recv, s.chunk, partial_op(step.from, step.mesh_dims)};
        break;
      }
      case StepKind::kAllReduce:
        collective_stage.collective = CollectiveOp{
            StepKind::kAllReduce, step.mesh_dims, in, out, volume(from), partial_op(step.from, step.mesh_dims)};
        break;
    }
    if (collective_stage.collective) {
      ps.stages.push_back(std::move(collective_stage));
      if (std::find(prog.communicator_dims.begin(), prog.communicator_dims.end(), step.mesh_dims) ==
          prog.communicator_dims.end())
        prog.communicator_dims.push_back(step.mesh_dims);
    }
    scratch_peak = std::max({scratch_peak, scratch.used(), exchange_scratch});
    prog.steps.push_back(std::move(ps));
  }
  prog.work_elements = scratch_base + scratch_peak;
  return prog;
}

}  // namespace detail

RankProgram lower(const Plan& plan, int rank) {
  const Mesh& mesh = plan.src().mesh();
  RESHARD_REQUIRE(rank >= 0 && rank < mesh.size(), "rank ", rank, " is not in mesh ", mesh.str());
  if (plan.scope_rank())
    RESHARD_REQUIRE(*plan.scope_rank() == rank, "this plan holds only rank ", *plan.scope_rank(),
                    "'s transfers; it cannot be lowered for rank ", rank);
  std::vector<detail::RankTransfers> mine(plan.steps().size());
  for (size_t i = 0; i < plan.steps().size(); ++i) {
    for (const Transfer& t : plan.steps()[i].transfers) {
      if (t.is_local() && t.dst == rank)
        mine[i].local.push_back(t);
      else if (!t.is_local() && t.src == rank)
        mine[i].sends.push_back(t);
      else if (!t.is_local() && t.dst == rank)
        mine[i].recvs.push_back(t);
    }
  }
  return detail::lower_steps(plan.src(), plan.steps(), plan.dtype(), rank, mine, plan.pipeline_chunk_bytes());
}

Index copy_elements(const std::vector<CopyRegion>& regions) {
  Index n = 0;
  for (const CopyRegion& r : regions) n += r.shape.product();
  return n;
}

}  // namespace reshard
