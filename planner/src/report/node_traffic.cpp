#include "report/node_traffic.hpp"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "plan/node_split.hpp"
#include "report/plan_traffic.hpp"
#include "reshard/partial.hpp"
#include "reshard/program.hpp"

namespace reshard::detail {
namespace {

// The largest world whose minimum is computed (per node, a grid over its ranks' box boundaries).
constexpr int kMaxMinimumRanks = 1 << 14;

Index node_of(const Topology& t, int rank) { return rank / std::max(1, t.ranks_per_node); }

// Grid cells times boxes examined per node at most.
constexpr Index kMaxCellChecks = Index(1) << 24;

// The volume of the union of `need` minus what `have` covers (boxes of one tensor): an element is covered when every
// class of `have` holds it in one of its boxes (a Partial source: each class one contribution), over the grid the
// boundaries cut the tensor into; unset past kMaxCellChecks.
std::optional<Index> uncovered_volume(const std::vector<Box>& need, const std::vector<std::vector<Box>>& have,
                                      int ndim) {
  if (need.empty()) return 0;
  std::vector<std::vector<Index>> cuts(static_cast<size_t>(ndim));
  Index boxes = static_cast<Index>(need.size());
  auto cut = [&](const Box& b) {
    for (int d = 0; d < ndim; ++d) {
      cuts[d].push_back(b.offset[d]);
      cuts[d].push_back(b.offset[d] + b.shape[d]);
    }
  };
  for (const Box& b : need) cut(b);
  for (const std::vector<Box>& c : have) {
    boxes += static_cast<Index>(c.size());
    for (const Box& b : c) cut(b);
  }
  Index cells = 1;
  for (auto& c : cuts) {
    std::sort(c.begin(), c.end());
    c.erase(std::unique(c.begin(), c.end()), c.end());
    cells *= std::max<Index>(1, static_cast<Index>(c.size()) - 1);
    if (cells * boxes > kMaxCellChecks) return std::nullopt;
  }
  Index total = 0;
  std::vector<Index> at(static_cast<size_t>(ndim), 0);  // the cell's index per dim
  for (Index cell = 0; cell < cells; ++cell) {
    Index rest = cell;
    for (int d = ndim - 1; d >= 0; --d) {
      const Index n = std::max<Index>(1, static_cast<Index>(cuts[d].size()) - 1);
      at[d] = rest % n;
      rest /= n;
    }
    auto inside = [&](const Box& b) {
      for (int d = 0; d < ndim; ++d) {
        if (cuts[d].size() < 2) return false;
        const Index lo = cuts[d][at[d]];
        if (lo < b.offset[d] || lo >= b.offset[d] + b.shape[d]) return false;
      }
      return true;
    };
    auto held = [&](const std::vector<Box>& c) { return std::any_of(c.begin(), c.end(), inside); };
    if (!std::any_of(need.begin(), need.end(), inside) ||
        (!have.empty() && std::all_of(have.begin(), have.end(), held)))
      continue;
    Index v = 1;
    for (int d = 0; d < ndim; ++d) v *= cuts[d][at[d] + 1] - cuts[d][at[d]];
    total += v;
  }
  return total;
}

// Every element a node's ranks need crosses into the node once, unless the node holds it: every contribution of it,
// for a Partial source (one class per coordinate on the reduced Partial dims; replicas of a class are alike). A
// Partial source whose Partial dims are not all reduced, or a Partial target: unset.
std::optional<Index> minimum_crossing(const Plan& plan) {
  const Layout& a = plan.src();
  const Layout& b = plan.dst();
  const int n = a.mesh().world_size();
  if (n > kMaxMinimumRanks) return std::nullopt;
  const PartialRoles roles = partial_roles(a, b);
  if (!roles.kept.empty() || !roles.created.empty()) return std::nullopt;
  auto class_of = [&](int r) {
    if (roles.reduced.empty() || !a.mesh().contains(r)) return 0;
    const Dims c = a.mesh().coord_of(r);
    int id = 0;
    for (int k : roles.reduced) id = id * a.mesh().dim_size(k) + static_cast<int>(c[k]);
    return id;
  };
  // node -> (needed, held by class: only the classes present on the node)
  std::map<Index, std::pair<std::vector<Box>, std::map<int, std::vector<Box>>>> nodes;
  for (int r = 0; r < n; ++r) {
    auto& [need, have] = nodes[node_of(plan.topology(), r)];
    const Box held = a.box(r), wanted = b.box(r);
    if (volume(held) > 0) have[class_of(r)].push_back(held);
    if (volume(wanted) > 0) need.push_back(wanted);
  }
  Index total = 0;
  for (const auto& [node, boxes] : nodes) {
    // A node without every class holds no element whole.
    std::vector<std::vector<Box>> classes;
    if (static_cast<Index>(boxes.second.size()) == std::max<Index>(1, roles.contributions))
      for (const auto& [c, held] : boxes.second) classes.push_back(held);
    const std::optional<Index> v = uncovered_volume(boxes.first, classes, a.ndim());
    if (!v) return std::nullopt;
    total = checked_add(total, *v, "bytes crossing nodes");
  }
  return checked_mul(total, static_cast<Index>(plan.element_size()), "bytes crossing nodes");
}

}  // namespace

bool spans_nodes(const Plan& plan) {
  return !plan.scope_rank() && plan.src().mesh().world_size() > plan.topology().ranks_per_node;
}

NodeTraffic node_traffic(const Plan& plan) {
  NodeTraffic out;
  const Topology& topo = plan.topology();
  const Mesh& mesh = plan.src().mesh();
  const int n = mesh.world_size(), es = plan.element_size();
  for (size_t i = 0; i < plan.steps().size(); ++i) {
    const Step& s = plan.steps()[i];
    if (s.kind == StepKind::kLocal) continue;
    if (s.kind == StepKind::kP2P) {
      for (const Transfer& t : s.transfers)
        if (node_of(topo, t.sender()) != node_of(topo, t.dst)) out.crossing += t.bytes;
      continue;
    }
    const Layout before = plan.layout_before(i), after = plan.layout_before(i + 1);
    if (s.hierarchical) {  // only each piece's all_reduce among one member per node crosses: 2 (m - 1) / m of it
      const NodeSplit split = node_split(before.mesh(), s.mesh_dims, topo).value();
      const Index m = split.nodes;
      for (int r = 0; r < n; ++r) out.crossing += 2 * (m - 1) * (before.local_volume(r) / split.parts) / m * es;
      continue;
    }
    const int g = mesh.group_size(s.mesh_dims);
    // Members of each group per node: a rank's group has g - same[(group, node)] members on other nodes.
    std::map<std::pair<Index, Index>, Index> same;
    std::vector<Index> group(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      group[r] = group_id(mesh, r, s.mesh_dims);
      ++same[{group[r], node_of(topo, r)}];
    }
    for (int r = 0; r < n; ++r) {
      const Index elsewhere = g - same[{group[r], node_of(topo, r)}];
      switch (s.kind) {
        case StepKind::kAllGather:
          out.crossing += elsewhere * before.local_volume(r) * es;
          break;
        case StepKind::kAllReduce:
          out.crossing += elsewhere * (2 * before.local_volume(r) / std::max(1, g)) * es;
          break;
        case StepKind::kReduceScatter:
          out.crossing += elsewhere * after.local_volume(r) * es;
          break;
        case StepKind::kAllToAll: {
          // The members' L_i+1 boxes tile the group's region, which holds r's L_i box: what does not stay on r's
          // node crosses.
          const Box ar = before.box(r);
          Index kept = 0;
          const int first = static_cast<int>(node_of(topo, r) * topo.ranks_per_node);
          for (int p = first; p < std::min(n, first + topo.ranks_per_node); ++p)
            if (group[p] == group[r]) kept += volume(intersect(ar, after.box(p)));
          out.crossing += (volume(ar) - kept) * es;
          break;
        }
        default:
          break;
      }
    }
  }
  out.minimum = minimum_crossing(plan);
  return out;
}

}  // namespace reshard::detail

namespace reshard {

Index exchange_bytes_to_other_nodes(const RankProgram& program, const Topology& topology) {
  Index bytes = 0;
  for (const Op& op : program.ops)
    if (const auto* x = std::get_if<Exchange>(&op.body))
      for (const PeerTransfer& t : x->sends)
        if (!topology.same_node(program.rank, t.peer)) bytes += t.elements * element_size(program.dtype);
  return bytes;
}

}  // namespace reshard
