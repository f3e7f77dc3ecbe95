#include "pricing/step_geometry.hpp"

#include <algorithm>

#include "plan/transitions.hpp"
#include "pricing/region_views.hpp"

namespace reshard::detail {

namespace {

// The dims box_copy's views of `region` end with (region_views.cpp: extent-1 dims dropped, dims contiguous in both
// views merged, a unit innermost dim added when the last run is strided), without building the views: the planner
// asks this for every transfer it prices. `row_elements`: the contiguous run (1 when the innermost dim is strided).
struct CopyShape {
  int dims = 0;
  Index row_elements = 1;
};

CopyShape copy_shape(const Box& region, const Box& from, const Box& to) {
  const Dims sf = row_major_strides(from.shape), st = row_major_strides(to.shape);
  Index shape[kMaxDims + 1], src[kMaxDims + 1], dst[kMaxDims + 1];
  int nd = 0;
  for (int i = 0; i < region.shape.size(); ++i) {
    const Index e = region.shape[i];
    if (e == 1) continue;
    if (nd > 0 && src[nd - 1] == sf[i] * e && dst[nd - 1] == st[i] * e) {
      shape[nd - 1] *= e;
      src[nd - 1] = sf[i];
      dst[nd - 1] = st[i];
      continue;
    }
    shape[nd] = e;
    src[nd] = sf[i];
    dst[nd] = st[i];
    ++nd;
  }
  if (nd > 0 && src[nd - 1] == 1 && dst[nd - 1] == 1) return CopyShape{nd, shape[nd - 1]};
  return CopyShape{nd + 1, 1};  // the unit innermost dim box_copy adds
}

}  // namespace

CopyEngine copy_engine_for(const Box& region, const Box& from, const Box& to, int element_size, Index min_row_bytes) {
  const CopyShape c = copy_shape(region, from, to);
  return c.dims <= 3 && c.row_elements * element_size >= min_row_bytes ? CopyEngine::kCopyEngine : CopyEngine::kKernel;
}

CopyEngine local_copy_engine_for(const Box& region, const Box& from, const Box& to, int element_size,
                                 Index min_row_bytes, bool low_sm) {
  if (low_sm) return copy_engine_for(region, from, to, element_size, min_row_bytes);
  return copy_shape(region, from, to).dims <= 1 ? CopyEngine::kCopyEngine : CopyEngine::kKernel;
}

Movement movement(const Box& region, const Box& sender_box, const Box& receiver_box, const ExchangeRules& rules) {
  Movement m;
  if (rules.transport == Transport::kNvlink) {  // straight from tensor to tensor, one piece
    if (!rules.reduces)
      m.engine = copy_engine_for(region, sender_box, receiver_box, rules.element_size, rules.copy_engine_min_row_bytes);
    return m;
  }
  m.sender_stages = !is_contiguous_in(sender_box, region);
  m.receiver_stages = rules.reduces || rules.receiver_converts || !is_contiguous_in(receiver_box, region);
  m.chunks = chunk_count(region, sender_box, receiver_box, rules.element_size, rules.chunk_bytes, rules.reduces);
  return m;
}

void RankExchange::send(const Transfer& t, const Movement& m, LinkClass link, Index count) {
  const Index bytes = t.bytes * count;
  traffic_.out_bytes[static_cast<int>(link)] += bytes;
  traffic_.peers_out += static_cast<int>(count);
  traffic_.stages = std::max(traffic_.stages, m.chunks);
  if (m.sender_stages) traffic_.pack_bytes += bytes;
  send_scratch(t.region, m, count);
}

void RankExchange::receive(const Transfer& t, const Movement& m, LinkClass link, Index count) {
  const Index bytes = t.bytes * count;
  traffic_.in_bytes[static_cast<int>(link)] += bytes;
  traffic_.peers_in += static_cast<int>(count);
  traffic_.stages = std::max(traffic_.stages, m.chunks);
  if (rules_.transport == Transport::kNvlink) {
    if (m.engine == CopyEngine::kCopyEngine) {
      traffic_.engine_in_bytes += bytes;
      traffic_.engine_calls += static_cast<int>(count);
    } else {
      traffic_.kernel_in_bytes += bytes;
    }
  }
  if (m.receiver_stages) traffic_.unpack_bytes += bytes;
  receive_scratch(t.region, m, count);
}

void RankExchange::local(const Transfer& t, const Box& from, const Box& to) {
  // Either transport: a local copy of one contiguous block goes to the copy engines (local_copy_engine_for).
  if (!rules_.reduces &&
      local_copy_engine_for(t.region, from, to, rules_.element_size, rules_.copy_engine_min_row_bytes, rules_.low_sm) ==
          CopyEngine::kCopyEngine)
    traffic_.local_engine_bytes += t.bytes;
  else
    traffic_.local_bytes += t.bytes;
}

RankTransfers all_to_all_transfers(const RankBoxes& a, const RankBoxes& b, std::span<const int> dims, int rank,
                                   int element_size) {
  RankTransfers t;
  const Box &mine_a = a[rank], &mine_b = b[rank];
  auto transfer = [&](int src, int dst, const Box& region) {
    return Transfer{src, dst, region, volume(region) * element_size};
  };
  for (int g : a.layout().mesh().group(rank, dims)) {
    Box out = intersect(mine_a, b[g]);
    Box in = intersect(a[g], mine_b);
    if (g == rank) {
      if (!is_empty(out)) t.local.push_back(transfer(rank, rank, out));
      continue;
    }
    if (!is_empty(out)) t.sends.push_back(transfer(rank, g, out));
    if (!is_empty(in)) t.recvs.push_back(transfer(g, rank, in));
  }
  return t;
}

RankExchange& all_to_all_exchange(const RankBoxes& a, const RankBoxes& b, std::span<const int> dims, int rank,
                                  const ExchangeRules& rules, const Topology& topology, RankExchange& x,
                                  bool scratch_only) {
  // The transfers all_to_all_transfers lists, accounted as rank_exchange accounts them (sums and maxima: the order
  // does not matter), visiting the group's members row-major over `dims` without building the group.
  x.reset(rules);
  const Mesh& mesh = a.layout().mesh();
  const int es = rules.element_size;
  const Box &mine_a = a[rank], &mine_b = b[rank];
  if (scratch_only) {  // what send() and receive() add to the scratch (a local copy adds none)
    for_each_member(mesh, rank, dims, [&](int g, int) {
      if (g == rank) return;
      const Box out = intersect(mine_a, b[g]);
      if (!is_empty(out)) x.send_scratch(out, movement(out, mine_a, b[g], rules));
      const Box in = intersect(a[g], mine_b);
      if (!is_empty(in)) x.receive_scratch(in, movement(in, a[g], mine_b, rules));
    });
    return x;
  }
  for_each_member(mesh, rank, dims, [&](int g, int) {
    const Box out = intersect(mine_a, b[g]);
    const Box in = intersect(a[g], mine_b);
    if (g == rank) {
      if (!is_empty(out)) x.local(Transfer{rank, rank, out, volume(out) * es}, mine_a, mine_b);
    } else {
      if (!is_empty(out))
        x.send(Transfer{rank, g, out, volume(out) * es}, movement(out, mine_a, b[g], rules), topology.link(rank, g));
      if (!is_empty(in))
        x.receive(Transfer{g, rank, in, volume(in) * es}, movement(in, a[g], mine_b, rules), topology.link(g, rank));
    }
  });
  return x;
}

RankExchange rank_exchange(const RankTransfers& t, const RankBoxes& a, const RankBoxes& b, int rank,
                           const ExchangeRules& rules, const Topology& topology) {
  RankExchange x(rules);
  for (const Transfer& tr : t.sends)
    x.send(tr, movement(tr.region, a[rank], b[tr.dst], rules), topology.link(rank, tr.dst));
  for (const Transfer& tr : t.recvs)
    x.receive(tr, movement(tr.region, a[tr.src], b[rank], rules), topology.link(tr.src, rank));
  for (const Transfer& tr : t.local) x.local(tr, a[rank], b[rank]);
  return x;
}

CollectiveScratch collective_scratch(StepKind kind, const RankBoxes& a, const RankBoxes& b, std::span<const int> dims,
                                     int rank) {
  CollectiveScratch s;
  if (kind == StepKind::kAllGather) {
    const GroupShape g = gather_shape(a, b, dims, rank);
    if (!g.send_in_place) s.send = g.chunk;
    if (!g.recv_in_place) s.recv = g.chunk * static_cast<Index>(g.size);
  } else if (kind == StepKind::kReduceScatter) {
    const GroupShape g = scatter_shape(a, b, dims, rank);
    if (!g.send_in_place) s.send = g.chunk * static_cast<Index>(g.size);
    if (!g.recv_in_place) s.recv = g.chunk;
  }
  return s;
}

}  // namespace reshard::detail
