#include <algorithm>

#include "chunking.hpp"
#include "lowering_core.hpp"
#include "step_pricing.hpp"
#include "transitions.hpp"

namespace reshard {
namespace detail {
namespace {

// Merges adjacent dims that are contiguous in both views and drops extent-1 dims.
CopyRegion simplified(CopyRegion r) {
  Dims shape, ss, ds;
  for (int i = 0; i < r.shape.size(); ++i) {
    if (r.shape[i] == 1) continue;
    if (shape.size() > 0) {
      int j = shape.size() - 1;
      if (ss[j] == r.src_strides[i] * r.shape[i] && ds[j] == r.dst_strides[i] * r.shape[i]) {
        shape[j] *= r.shape[i];
        ss[j] = r.src_strides[i];
        ds[j] = r.dst_strides[i];
        continue;
      }
    }
    shape.push_back(r.shape[i]);
    ss.push_back(r.src_strides[i]);
    ds.push_back(r.dst_strides[i]);
  }
  // Copy kernels move rows: the innermost dim is contiguous in both views (a run of one element when needed).
  if (shape.size() == 0 || ss[shape.size() - 1] != 1 || ds[shape.size() - 1] != 1) {
    shape.push_back(1);
    ss.push_back(1);
    ds.push_back(1);
  }
  r.shape = shape;
  r.src_strides = ss;
  r.dst_strides = ds;
  return r;
}

// Copy of `region` (global coordinates) from a tensor holding box `from` to one holding box `to`.
CopyRegion box_copy(BufferRef src, const Box& from, BufferRef dst, const Box& to, const Box& region) {
  src.offset += local_offset(from, region);
  dst.offset += local_offset(to, region);
  return simplified(CopyRegion{src, dst, region.shape, row_major_strides(from.shape), row_major_strides(to.shape)});
}

// Hands out aligned areas of the step's scratch space (sizes as StepPricer accounts them).
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

// Lowers an exchange (p2p or all_to_all) from the transfers involving this rank. Transfers that need copying are
// cut into pipeline chunks (chunking.hpp), chunk i going to stage i; both peers cut alike.
void lower_exchange(ProgramStep& ps, const RankTransfers& t, const RankBoxes& a, const RankBoxes& b, int rank,
                    BufferRef in, BufferRef out, Scratch& scratch, int es, Index chunk_bytes) {
  const Box &from = a[rank], &to = b[rank];
  for (const Transfer& x : t.local) ps.local.push_back(box_copy(in, from, out, to, x.region));
  auto stage = [&](int i) -> Stage& {
    if (static_cast<int>(ps.stages.size()) <= i) ps.stages.resize(i + 1);
    return ps.stages[i];
  };
  if (!t.sends.empty() || !t.recvs.empty()) stage(0);
  for (const Transfer& x : t.sends) {
    const int k = chunk_count(x.region, from, b[x.dst], es, chunk_bytes);
    const bool contiguous = is_contiguous_in(from, x.region);
    for (int i = 0; i < k; ++i) {
      Box c = chunk_of(x.region, k, i);
      Index n = volume(c);
      if (contiguous) {
        stage(i).sends.push_back(PeerTransfer{x.dst, BufferRef{in.buffer, in.offset + local_offset(from, c)}, n});
      } else {
        BufferRef area = scratch.take(n);
        stage(i).pack.push_back(box_copy(in, from, area, c, c));
        stage(i).sends.push_back(PeerTransfer{x.dst, area, n});
      }
    }
  }
  for (const Transfer& x : t.recvs) {
    const int k = chunk_count(x.region, a[x.src], to, es, chunk_bytes);
    const bool contiguous = is_contiguous_in(to, x.region);
    for (int i = 0; i < k; ++i) {
      Box c = chunk_of(x.region, k, i);
      Index n = volume(c);
      if (contiguous) {
        stage(i).recvs.push_back(PeerTransfer{x.src, BufferRef{out.buffer, out.offset + local_offset(to, c)}, n});
      } else {
        BufferRef area = scratch.take(n);
        stage(i).unpack.push_back(box_copy(area, c, out, to, c));
        stage(i).recvs.push_back(PeerTransfer{x.src, area, n});
      }
    }
  }
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
    ProgramStep ps;
    ps.kind = step.kind;
    Stage collective_stage;
    switch (step.kind) {
      case StepKind::kP2P:
        lower_exchange(ps, transfers.at(i), a, b, rank, in, out, scratch, es, chunk_bytes);
        break;
      case StepKind::kAllToAll:
        lower_exchange(ps, all_to_all_transfers(a, b, step.mesh_dims, rank), a, b, rank, in, out, scratch, es,
                       chunk_bytes);
        break;
      case StepKind::kLocal:
        if (!is_empty(to)) ps.local.push_back(box_copy(in, from, out, to, to));
        break;
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
    scratch_peak = std::max(scratch_peak, scratch.used());
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
