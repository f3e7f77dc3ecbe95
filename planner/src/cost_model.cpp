#include "reshard/cost_model.hpp"

#include <algorithm>

namespace reshard {

double CostModel::all_gather_us(int n, Index chunk_bytes, LinkClass c) const {
  if (n <= 1) return copy_us(chunk_bytes);
  return link(c).all_gather.time_us(static_cast<double>(n - 1) * static_cast<double>(chunk_bytes));
}

double CostModel::reduce_scatter_us(int n, Index chunk_bytes, LinkClass c) const {
  if (n <= 1) return copy_us(chunk_bytes);
  return link(c).reduce_scatter.time_us(static_cast<double>(n - 1) * static_cast<double>(chunk_bytes));
}

double CostModel::all_reduce_us(int n, Index bytes, LinkClass c) const {
  if (n <= 1) return copy_us(bytes);
  return link(c).all_reduce.time_us(2.0 * (n - 1) / n * static_cast<double>(bytes));
}

double CostModel::copy_us(Index bytes) const {
  return bytes > 0 ? profile_.copy.time_us(static_cast<double>(bytes)) : 0.0;
}

double CostModel::exchange_rank_us(const RankTraffic& t, bool all_to_all) const {
  double wire = 0;
  double alpha = 0;
  bool any = false;
  const int stages = std::max(1, t.stages);
  double staged = 0;  // pipelined: every stage sends a chunk, at the (calibrated) efficiency of its size
  for (LinkClass c : {LinkClass::kIntraNode, LinkClass::kInterNode}) {
    int i = static_cast<int>(c);
    Index bytes = std::max(t.out_bytes[i], t.in_bytes[i]);
    if (bytes == 0) continue;
    const AlphaBeta& ab = all_to_all ? link(c).all_to_all : link(c).p2p;
    wire = std::max(wire, static_cast<double>(bytes) / (ab.bandwidth_GBps * 1e3));
    alpha = std::max(alpha, ab.alpha_us);
    staged = std::max(staged, stages * ab.time_us(static_cast<double>(bytes) / stages));
    any = true;
  }
  const int peers = std::max(t.peers_out, t.peers_in);
  double network = any || peers > 0 ? stages * alpha + profile_.p2p_per_peer_us * peers + wire : 0.0;
  if (stages > 1 && any) network = std::max(network, staged + profile_.p2p_per_peer_us * peers);
  if (stages == 1) return copy_us(t.pack_bytes) + std::max(network, copy_us(t.local_bytes)) + copy_us(t.unpack_bytes);
  const double pack = copy_us(t.pack_bytes), unpack = copy_us(t.unpack_bytes);
  return pack / stages + std::max({network, pack, unpack, copy_us(t.local_bytes)}) + unpack / stages;
}

}  // namespace reshard
