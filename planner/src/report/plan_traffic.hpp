// The logical traffic of a plan's steps, for its table and picture, computed without any rank x rank matrix: per
// rank (bytes out and in over all steps) or between blocks of consecutive ranks (at most cells x cells entries).
//
// Bytes each rank sends each other rank in one step: p2p, its transfers; all_gather, its L_i tensor to every other
// member; all_to_all, the part of its L_i box inside each member's L_i+1 box; reduce_scatter, each member's L_i+1
// box; all_reduce, the ring's 2 (n - 1) / n share spread evenly (2 |L_i| / n to each member). Local copies (p2p
// transfers to self, local steps) sit on the diagonal and are not counted as traffic.
#pragma once

#include <vector>

#include "reshard/plan.hpp"

namespace reshard::detail {

// Which group over `dims` a rank belongs to: its coordinates on the other mesh dims, row-major.
Index group_id(const Mesh& mesh, int rank, const std::vector<int>& dims);

struct RankTotals {
  std::vector<double> out, in;  // per rank, over all steps, local copies excluded
};
RankTotals rank_traffic(const Plan& plan);

struct BlockTraffic {
  int block = 1;               // ranks per cell
  int cells = 0;               // per side
  std::vector<double> bytes;   // [a * cells + b]: block a to block b (local copies on the diagonal)
  std::vector<bool> local;     // [a * cells + b]: the entry holds local copies (only diagonal entries can)
  std::vector<int> peers_out;  // per rank: how many other ranks it sends to in this step
};
BlockTraffic block_traffic(const Plan& plan, size_t step, int block);

}  // namespace reshard::detail
