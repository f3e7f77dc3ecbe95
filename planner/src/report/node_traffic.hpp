// The bytes a plan moves between nodes (Topology::ranks_per_node consecutive ranks per node), against the least the
// two layouts require: every byte a node's ranks need and none of them holds crosses into the node once.
//
// Counted as plan_traffic.hpp counts logical traffic: p2p, its transfers between ranks of different nodes; all_gather
// and all_reduce, what a rank sends each member on another node; reduce_scatter, what each such member receives;
// all_to_all, the part of a rank's L_i box inside the L_i+1 boxes of members on other nodes.
#pragma once

#include <optional>

#include "reshard/plan.hpp"

namespace reshard::detail {

struct NodeTraffic {
  Index crossing = 0;            // bytes the plan sends between nodes, over all steps
  std::optional<Index> minimum;  // the least the layouts require; unset for Partial sources and very large meshes
};
NodeTraffic node_traffic(const Plan& plan);
// Whether the plan's world spans more than one node (and the plan holds every rank's transfers, not one rank's).
bool spans_nodes(const Plan& plan);

}  // namespace reshard::detail
