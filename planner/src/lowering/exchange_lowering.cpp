#include "lowering/exchange_lowering.hpp"

#include <algorithm>

#include "lowering/issue_order.hpp"
#include "pricing/region_views.hpp"

namespace reshard::detail {
namespace {

struct RegionOrder {
  bool operator()(const Box& a, const Box& b) const {
    for (int i = 0; i < a.ndim(); ++i) {
      if (a.offset[i] != b.offset[i]) return a.offset[i] < b.offset[i];
      if (a.shape[i] != b.shape[i]) return a.shape[i] < b.shape[i];
    }
    return false;
  }
};

// A reducing rank's contributions (received and its own), one group per region, each group in sender-rank order:
// the order every backend reduces in, so that results are bitwise the same everywhere.
std::vector<std::vector<const Transfer*>> contributions(const RankTransfers& t) {
  std::vector<const Transfer*> into;
  for (const Transfer& tr : t.recvs) into.push_back(&tr);
  for (const Transfer& tr : t.local) into.push_back(&tr);
  std::stable_sort(into.begin(), into.end(), [](const Transfer* p, const Transfer* q) {
    RegionOrder less;
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

}  // namespace

// A rank's local copy of `region` from its `from` tensor into its `to` tensor, on the engine the step geometry picks.
void add_local_copy(StepParts& ps, BufferRef in, const Box& from, BufferRef out, const Box& to, const Box& region,
                    const ExchangeRules& rules) {
  (local_copy_engine_for(region, from, to, rules.element_size, rules.copy_engine_min_row_bytes, rules.low_sm) ==
           CopyEngine::kCopyEngine
       ? ps.local_engine
       : ps.local)
      .push_back(box_copy(in, from, out, to, region));
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
void lower_one_sided(StepParts& ps, const RankTransfers& t, const std::vector<Transfer>& step_transfers,
                     const RankBoxes& a, const RankBoxes& b, int rank, const StepBuffers& buf,
                     const ExchangeRules& rules, const PartialRoles& roles, bool fused, bool push,
                     const PeerTensor& peer_in, const PeerTensor& peer_out) {
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

}  // namespace reshard::detail
