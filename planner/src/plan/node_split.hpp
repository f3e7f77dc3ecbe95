// The node split of a collective's groups (Step::hierarchical, internal to the planner): where every group over a
// step's mesh dims holds `parts` consecutive members (in group order) on each of `nodes` nodes, its innermost dim of
// size s is viewed as (s / parts, parts), and the group's all_reduce runs as a reduce_scatter over the `within` dims
// (the members on one node), an all_reduce of each 1/parts piece over the `across` dims (one member per node) and an
// all_gather over `within`: each piece crosses between nodes once per node instead of the whole tensor.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "reshard/mesh.hpp"
#include "reshard/mesh_group.hpp"
#include "reshard/topology.hpp"

namespace reshard::detail {

struct NodeSplit {
  int dim = -1;              // the split mesh dim (the innermost of the step's dims)
  int parts = 0;             // members of a group on one node
  int nodes = 0;             // nodes a group spans
  GroupSpec within, across;  // the two communicators, on the split mesh
};

// The split of the groups over `dims`, or nothing where their members do not fall into runs of one size, more than
// one and fewer than the group, each on its own node (or the innermost dim is not a multiple of that size).
std::optional<NodeSplit> node_split(const Mesh& mesh, std::span<const int> dims, const Topology& topology);

}  // namespace reshard::detail
