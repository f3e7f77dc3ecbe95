#include "plan/node_split.hpp"

#include <algorithm>

namespace reshard::detail {

std::optional<NodeSplit> node_split(const Mesh& mesh, std::span<const int> dims, const Topology& topology) {
  if (dims.empty()) return std::nullopt;
  const int n = mesh.group_size(dims);
  const int d = dims.back(), s = mesh.dim_size(d);
  // The run length: members of rank 0's group on the first member's node, counted from the start.
  const std::vector<int> first = mesh.group(mesh.ranks().front(), dims);
  int parts = 1;
  while (parts < n && topology.same_node(first[parts], first[0])) ++parts;
  if (parts <= 1 || parts >= n || s % parts != 0) return std::nullopt;
  // Every group: each run of `parts` members on one node, no two runs on the same node.
  std::vector<char> seen(static_cast<size_t>(mesh.world_size()), 0);
  for (int r : mesh.ranks()) {
    if (seen[r]) continue;
    const std::vector<int> g = mesh.group(r, dims);
    std::vector<int> nodes;
    for (int i = 0; i < n; ++i) {
      seen[g[i]] = 1;
      if (!topology.same_node(g[i], g[i - i % parts])) return std::nullopt;
      if (i % parts == 0) nodes.push_back(topology.node_of(g[i]));
    }
    std::sort(nodes.begin(), nodes.end());
    if (std::adjacent_find(nodes.begin(), nodes.end()) != nodes.end()) return std::nullopt;
  }
  NodeSplit split;
  split.dim = d;
  split.parts = parts;
  split.nodes = n / parts;
  // On the split mesh, dim d is the (s / parts) part and d + 1 the `parts` part; later dims move up by one.
  auto moved = [&](int k) { return k > d ? k + 1 : k; };
  split.within = GroupSpec{{d + 1}, d, parts};
  split.across.split_dim = d;
  split.across.split_parts = parts;
  for (int k : dims) split.across.mesh_dims.push_back(moved(k));
  return split;
}

}  // namespace reshard::detail
