#include "reshard/cost_model.hpp"

#include <algorithm>

namespace reshard {

double CostModel::all_gather_us(int n, Index chunk_bytes, LinkClass c) const {
  if (n <= 1) return copy_us(chunk_bytes);
  return on_sms(link(c).all_gather.time_us(static_cast<double>(n - 1) * static_cast<double>(chunk_bytes)));
}

double CostModel::reduce_scatter_us(int n, Index chunk_bytes, LinkClass c) const {
  if (n <= 1) return copy_us(chunk_bytes);
  return on_sms(link(c).reduce_scatter.time_us(static_cast<double>(n - 1) * static_cast<double>(chunk_bytes)));
}

double CostModel::all_reduce_us(int n, Index bytes, LinkClass c) const {
  if (n <= 1) return copy_us(bytes);
  return on_sms(link(c).all_reduce.time_us(2.0 * (n - 1) / n * static_cast<double>(bytes)));
}

double CostModel::copy_us(Index bytes) const {
  return bytes > 0 ? on_sms(profile_.copy.time_us(static_cast<double>(bytes))) : 0.0;
}

double CostModel::copy_engine_us(Index bytes) const {
  return bytes > 0 ? profile_.copy_engine.time_us(static_cast<double>(bytes)) : 0.0;
}

double CostModel::one_sided_rank_us(const RankTraffic& t) const {
  const OneSidedProfile& n = profile_.nvlink;
  double pull = 0;
  if (t.engine_in_bytes > 0)
    pull += t.engine_calls * n.copy_engine.alpha_us +
            static_cast<double>(t.engine_in_bytes) / (n.copy_engine.bandwidth_GBps * 1e3);
  if (t.kernel_in_bytes > 0) pull += on_sms(n.kernel.time_us(static_cast<double>(t.kernel_in_bytes)));
  Index out = 0;
  for (Index b : t.out_bytes) out += b;
  const double serve = static_cast<double>(out) / (n.copy_engine.bandwidth_GBps * 1e3);
  const double local = copy_us(t.local_bytes) + copy_engine_us(t.local_engine_bytes);
  const bool communicates = t.peers_in > 0 || t.peers_out > 0;
  return (communicates ? n.sync_us : 0.0) + std::max({pull, serve, local});
}

double CostModel::fused_rank_us(const RankTraffic& t) const {
  Index in = t.local_bytes + t.local_engine_bytes;
  for (Index b : t.in_bytes) in += b;
  Index out = 0;
  for (Index b : t.out_bytes) out += b;
  const OneSidedProfile& n = profile_.nvlink;
  return std::max(on_sms(n.fused.time_us(static_cast<double>(std::max(in, out)))), n.fused_overhead_us);
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
  // NCCL's send/recv kernels run on SMs.
  network = on_sms(network);
  const double local = copy_us(t.local_bytes) + copy_engine_us(t.local_engine_bytes);  // on its own lane
  if (stages == 1) return copy_us(t.pack_bytes) + std::max(network, local) + copy_us(t.unpack_bytes);
  const double pack = copy_us(t.pack_bytes), unpack = copy_us(t.unpack_bytes);
  return pack / stages + std::max({network, pack, unpack, local}) + unpack / stages;
}

}  // namespace reshard
