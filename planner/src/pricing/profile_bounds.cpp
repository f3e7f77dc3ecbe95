#include "pricing/profile_bounds.hpp"

#include <algorithm>

namespace reshard::detail {

bool times_nonnegative(const Profile& p) {
  auto line = [](const AlphaBeta& ab) {
    return ab.alpha_us >= 0 && ab.bandwidth_GBps > 0 &&
           std::all_of(ab.samples.begin(), ab.samples.end(),
                       [](const auto& s) { return s.first > 0 && s.second >= 0; });
  };
  for (const LinkProfile* l : {&p.intra_node, &p.inter_node})
    for (const AlphaBeta* ab : {&l->p2p, &l->all_gather, &l->reduce_scatter, &l->all_reduce, &l->all_to_all})
      if (!line(*ab)) return false;
  const OneSidedProfile& n = p.nvlink;
  return line(p.copy) && line(p.copy_engine) && line(n.copy_engine) && line(n.kernel) && line(n.fused) &&
         p.p2p_per_peer_us >= 0 && p.step_overhead_us >= 0 && p.low_sm_kernel_factor >= 0 && n.sync_us >= 0 &&
         n.step_overhead_us >= 0 && n.fused_overhead_us >= 0 && n.map_us >= 0 && n.first_map_us >= 0;
}

}  // namespace reshard::detail
