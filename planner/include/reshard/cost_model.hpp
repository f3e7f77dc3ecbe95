// CostModel: alpha-beta prices of the operations a plan is made of (docs/planner.md has the formulas).
//
// Collectives (ring formulas, nccl-tests' bus-bandwidth factors), on a group of n ranks:
//   all_gather      t = alpha + (n-1) * chunk / busbw        (chunk: bytes each member contributes)
//   reduce_scatter  t = alpha + (n-1) * chunk / busbw        (chunk: bytes each member receives)
//   all_reduce      t = alpha + 2 (n-1) / n * bytes / busbw
// with the inter-node parameters when the group spans nodes.
// A p2p step (and an all_to_all, priced the same way with its own parameters) costs its slowest rank:
//   net_r = S_r * alpha + per_peer * peers_r + max_c(max(out_r,c, in_r,c) / bw_c)
//   t_r   = pack_r / (S_r copy_bw) + max(net_r, pack_r / copy_bw, unpack_r / copy_bw, local_r / copy_bw)
//           + unpack_r / (S_r copy_bw)
// where c runs over the link classes (intra-node, inter-node), S_r is the number of pipeline stages (each its own
// NCCL group, hence S_r alphas; packing stage s+1 and unpacking stage s-1 overlap stage s on the wire) and the
// local copy overlaps everything. With S_r = 1 this is pack + max(network, local) + unpack.
// A one-sided (NVLink) p2p step costs its slowest rank:
//   t_r = sync + max(pull_r, serve_r, local_r)
//   pull_r  = calls_r * nvlink.copy_engine.alpha + engine_in_r / nvlink.copy_engine.bw + nvlink.kernel(kernel_in_r)
//   serve_r = out_r / nvlink.copy_engine.bw         (peers pulling this rank's regions over its links)
//   local_r = copy(local_kernel_r) + copy_engine(local_engine_r)
// with nothing staged (no pack, no unpack, no scratch); its host work is nvlink.step_overhead_us. Fused into one
// kernel per rank (small steps; a reducing step's in_r + local_r counts every contribution it reads):
// t_r = nvlink.fused(max(in_r + local_r, out_r)), host work nvlink.fused_overhead_us.
// Copies cost copy.alpha (a kernel launch) plus bytes / copy bandwidth, or on the copy engines copy_engine's;
// nothing to copy costs nothing.
// A step that communicates costs at least step_overhead_us, the executor's fixed host work per call (launches,
// events, NCCL group calls), which overlaps the GPU work: t = max(step_overhead, t_gpu). It dominates small
// tensors. Local steps cost their copy.
// Low-SM mode (PlanOptions::low_sm, for a redistribution run beside compute): every time above spent in SM kernels
// (collectives, NCCL exchanges, copy kernels, nvlink kernel pulls, fused kernels) is multiplied by
// profile.low_sm_kernel_factor; copy-engine copies, the nvlink ordering (stream memory operations) and host work are
// not.
#pragma once

#include <algorithm>
#include "reshard/profile.hpp"

#include "reshard/checked_math.hpp"
#include "reshard/topology.hpp"

namespace reshard {

// One rank's traffic in a p2p or all_to_all step.
struct RankTraffic {
  Index out_bytes[2] = {0, 0};  // by LinkClass
  Index in_bytes[2] = {0, 0};
  int peers_out = 0;
  int peers_in = 0;
  Index pack_bytes = 0;    // outgoing bytes that must be packed into a contiguous buffer
  Index unpack_bytes = 0;  // incoming bytes that must be scattered from a contiguous buffer
  Index local_bytes = 0;   // bytes copied locally (src == dst) by a kernel
  int stages = 1;          // pipeline stages: packing stage s+1 overlaps the transfer of stage s
  // One-sided steps: incoming bytes pulled by the copy engines (in that many calls) or by a kernel (reductions
  // reading peers' contributions included), and local bytes copied on the copy engines.
  Index engine_in_bytes = 0, kernel_in_bytes = 0, local_engine_bytes = 0;
  int engine_calls = 0;
};

class CostModel {
 public:
  CostModel(Profile profile, Topology topology, bool low_sm = false)
      : profile_(std::move(profile)), topology_(topology), low_sm_(low_sm) {}

  const Profile& profile() const { return profile_; }
  const Topology& topology() const { return topology_; }
  bool low_sm() const { return low_sm_; }

  double all_gather_us(int n, Index chunk_bytes, LinkClass link) const;
  double reduce_scatter_us(int n, Index chunk_bytes, LinkClass link) const;
  double all_reduce_us(int n, Index bytes, LinkClass link) const;
  double copy_us(Index bytes) const;
  double copy_engine_us(Index bytes) const;  // a local copy on the copy engines
  double step_overhead_us() const { return profile_.step_overhead_us; }
  // A communicating step's time: its GPU time, or the host work that issues it when that is longer.
  double with_overhead(double gpu_us) const { return std::max(gpu_us, profile_.step_overhead_us); }
  // Time of one rank's side of a p2p (all_to_all = false) or all_to_all step.
  double exchange_rank_us(const RankTraffic& t, bool all_to_all) const;
  // Time of one rank's side of a one-sided (NVLink) p2p step, and that step's host work.
  double one_sided_rank_us(const RankTraffic& t) const;
  // The same step fused into one kernel per rank (every copy a kernel copy): t = fused(max(in + local, out) bytes),
  // at least its host work.
  double fused_rank_us(const RankTraffic& t) const;
  double one_sided_with_overhead(double gpu_us) const { return std::max(gpu_us, profile_.nvlink.step_overhead_us); }

 private:
  const LinkProfile& link(LinkClass c) const {
    return c == LinkClass::kIntraNode ? profile_.intra_node : profile_.inter_node;
  }
  // Time spent in SM kernels, as priced: low-SM mode charges it profile.low_sm_kernel_factor.
  double on_sms(double us) const { return low_sm_ ? us * profile_.low_sm_kernel_factor : us; }
  Profile profile_;
  Topology topology_;
  bool low_sm_ = false;
};

}  // namespace reshard
