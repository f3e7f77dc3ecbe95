#include "step_pricing.hpp"

#include <algorithm>

#include "chunking.hpp"
#include "transitions.hpp"

namespace reshard::detail {
namespace {

// Per-rank traffic of an all_to_all on the rank's group.
struct GroupExchange {
  RankTraffic traffic;
  Index scratch = 0;
};

GroupExchange group_exchange(const RankBoxes& a, const RankBoxes& b, std::span<const int> dims, int rank, int es,
                             Index chunk_bytes) {
  GroupExchange x;
  StageScratch scratch(es);
  const Box &mine_a = a[rank], &mine_b = b[rank];
  for (int g : a.layout().mesh().group(rank, dims)) {
    if (g == rank) continue;
    Box out = intersect(mine_a, b[g]), in = intersect(a[g], mine_b);
    if (!is_empty(out)) {
      ++x.traffic.peers_out;
      int k = chunk_count(out, mine_a, b[g], es, chunk_bytes);
      x.traffic.stages = std::max(x.traffic.stages, k);
      bool packs = !is_contiguous_in(mine_a, out);
      if (packs) x.traffic.pack_bytes += volume(out) * es;
      if (packs) scratch.add_chunks(out, k);
    }
    if (!is_empty(in)) {
      ++x.traffic.peers_in;
      int k = chunk_count(in, a[g], mine_b, es, chunk_bytes);
      x.traffic.stages = std::max(x.traffic.stages, k);
      bool unpacks = !is_contiguous_in(mine_b, in);
      if (unpacks) x.traffic.unpack_bytes += volume(in) * es;
      if (unpacks) scratch.add_chunks(in, k);
    }
  }
  x.scratch = scratch.total();
  return x;
}

std::vector<int> representatives(const RankBoxes& boxes) {
  std::vector<int> r{0, boxes.size() - 1, boxes.max_volume_rank()};
  std::sort(r.begin(), r.end());
  r.erase(std::unique(r.begin(), r.end()), r.end());
  return r;
}

}  // namespace

StepPrice StepPricer::collective(const RankBoxes& a, const RankBoxes& b, StepKind kind,
                                 std::span<const int> dims) const {
  StepPrice p = collective_wire(a, b, kind, dims);
  if (is_communication(kind)) p.us = model_.with_overhead(p.us);
  return p;
}

StepPrice StepPricer::collective_wire(const RankBoxes& a, const RankBoxes& b, StepKind kind,
                                      std::span<const int> dims) const {
  const Mesh& mesh = a.layout().mesh();
  const int n = mesh.group_size(dims);
  const LinkClass link = group_link(mesh, dims, model_.topology());
  StepPrice p;
  switch (kind) {
    case StepKind::kLocal:
      p.us = model_.copy_us(b.max_volume() * es_);
      return p;
    case StepKind::kAllGather: {
      double pack = 0, unpack = 0;
      for (int r : representatives(a)) {
        GatherGeometry g = gather_geometry(a, b, dims, r);
        if (!g.send_in_place) pack = std::max(pack, model_.copy_us(a.volume(r) * es_));
        if (!g.recv_in_place) unpack = std::max(unpack, model_.copy_us(g.chunk * n * es_));
      }
      p.us = pack + model_.all_gather_us(n, a.max_volume() * es_, link) + unpack;
      p.bytes_moved = a.total_volume() * (n - 1) * es_;
      return p;
    }
    case StepKind::kReduceScatter: {
      double pack = 0, unpack = 0;
      for (int r : representatives(b)) {
        ScatterGeometry s = scatter_geometry(a, b, dims, r);
        if (!s.send_in_place) pack = std::max(pack, model_.copy_us(s.chunk * n * es_));
        if (!s.recv_in_place) unpack = std::max(unpack, model_.copy_us(b.volume(r) * es_));
      }
      p.us = pack + model_.reduce_scatter_us(n, b.max_volume() * es_, link) + unpack;
      p.bytes_moved = b.total_volume() * (n - 1) * es_;
      return p;
    }
    case StepKind::kAllReduce:
      p.us = model_.all_reduce_us(n, a.max_volume() * es_, link);
      p.bytes_moved = 2 * (n - 1) * a.total_volume() * es_ / std::max(n, 1);
      return p;
    case StepKind::kAllToAll: {
      RankTraffic worst;
      const int li = static_cast<int>(link);
      for (int r = 0; r < a.size(); ++r) {
        Index keep = volume(intersect(a[r], b[r]));
        worst.out_bytes[li] = std::max(worst.out_bytes[li], (a.volume(r) - keep) * es_);
        worst.in_bytes[li] = std::max(worst.in_bytes[li], (b.volume(r) - keep) * es_);
        worst.local_bytes = std::max(worst.local_bytes, keep * es_);
        p.bytes_moved += (a.volume(r) - keep) * es_;
      }
      for (int r : representatives(a)) {
        RankTraffic t = group_exchange(a, b, dims, r, es_, chunk_bytes_).traffic;
        worst.peers_out = std::max(worst.peers_out, t.peers_out);
        worst.peers_in = std::max(worst.peers_in, t.peers_in);
        worst.pack_bytes = std::max(worst.pack_bytes, t.pack_bytes);
        worst.unpack_bytes = std::max(worst.unpack_bytes, t.unpack_bytes);
        worst.stages = std::max(worst.stages, t.stages);
      }
      p.us = model_.exchange_rank_us(worst, true);
      return p;
    }
    case StepKind::kP2P:
      break;
  }
  fail(ErrorKind::kInternal, "p2p steps are priced from their transfers");
}

std::vector<Index> StepPricer::collective_scratch(const RankBoxes& a, const RankBoxes& b, StepKind kind,
                                                  std::span<const int> dims) const {
  std::vector<Index> scratch(a.size(), 0);
  for (int r = 0; r < a.size(); ++r) {
    switch (kind) {
      case StepKind::kAllGather: {
        GatherGeometry g = gather_geometry(a, b, dims, r);
        if (!g.send_in_place) scratch[r] += aligned_elements(g.chunk, es_);
        if (!g.recv_in_place) scratch[r] += aligned_elements(g.chunk * static_cast<Index>(g.group.size()), es_);
        break;
      }
      case StepKind::kReduceScatter: {
        ScatterGeometry s = scatter_geometry(a, b, dims, r);
        if (!s.send_in_place) scratch[r] += aligned_elements(s.chunk * static_cast<Index>(s.group.size()), es_);
        if (!s.recv_in_place) scratch[r] += aligned_elements(s.chunk, es_);
        break;
      }
      case StepKind::kAllToAll:
        scratch[r] = group_exchange(a, b, dims, r, es_, chunk_bytes_).scratch;
        break;
      default:
        break;
    }
  }
  return scratch;
}

PricedStep StepPricer::p2p(const OverlapIndex& index, const TransferFilter& keep) const {
  const RankBoxes &a = index.src_boxes(), &b = index.dst_boxes();
  const int n = a.size();
  std::vector<RankTraffic> traffic(n);
  PricedStep ps;
  ps.scratch.assign(n, 0);
  ps.step.kind = StepKind::kP2P;
  ps.step.from = a.layout().placements();
  ps.step.to = b.layout().placements();
  std::vector<StageScratch> scratch(n, StageScratch(es_));
  // A step that reduces Partial contributions copies every received one out of scratch (the reduction).
  const bool reduces = index.partial_roles().contributions > 1;
  std::vector<Transfer> buffer;
  // From the destination side every transfer is visited exactly once (the source side would also visit the
  // destinations that another replica serves).
  for (int r = 0; r < n; ++r) {
    buffer.clear();
    index.transfers_into(r, buffer);
    for (const Transfer& t : buffer) {
      if (keep.keeps(t)) ps.step.transfers.push_back(t);
      if (t.is_local()) {
        traffic[t.dst].local_bytes += t.bytes;
        continue;
      }
      int c = static_cast<int>(model_.topology().link(t.src, t.dst));
      RankTraffic &out = traffic[t.src], &in = traffic[t.dst];
      out.out_bytes[c] += t.bytes;
      in.in_bytes[c] += t.bytes;
      ++out.peers_out;
      ++in.peers_in;
      const int k = chunk_count(t.region, a[t.src], b[t.dst], es_, chunk_bytes_, reduces);
      out.stages = std::max(out.stages, k);
      in.stages = std::max(in.stages, k);
      const bool packs = !is_contiguous_in(a[t.src], t.region);
      const bool unpacks = reduces || !is_contiguous_in(b[t.dst], t.region);
      if (packs) out.pack_bytes += t.bytes;
      if (unpacks) in.unpack_bytes += t.bytes;
      if (packs) scratch[t.src].add_chunks(t.region, k);
      if (unpacks) scratch[t.dst].add_chunks(t.region, k);
      ps.step.bytes_moved += t.bytes;
    }
  }
  for (int r = 0; r < n; ++r) ps.scratch[r] = scratch[r].total();
  for (const RankTraffic& t : traffic)
    ps.step.estimated_us = std::max(ps.step.estimated_us, model_.exchange_rank_us(t, false));
  if (ps.step.bytes_moved > 0) ps.step.estimated_us = model_.with_overhead(ps.step.estimated_us);  // local: copies only
  std::sort(ps.step.transfers.begin(), ps.step.transfers.end(),
            [](const Transfer& x, const Transfer& y) { return x.src != y.src ? x.src < y.src : x.dst < y.dst; });
  return ps;
}

}  // namespace reshard::detail
