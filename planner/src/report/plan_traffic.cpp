#include "report/plan_traffic.hpp"

#include <algorithm>
#include <map>

#include "plan/node_split.hpp"

namespace reshard::detail {

Index group_id(const Mesh& mesh, int rank, const std::vector<int>& dims) {
  const Dims c = mesh.coord_of(rank);
  Index key = 0;
  for (int d = 0; d < mesh.ndim(); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) key = key * mesh.shape()[d] + c[d];
  return key;
}

namespace {

Index groups(const Mesh& mesh, const std::vector<int>& dims) {
  return mesh.size() / std::max(1, mesh.group_size(dims));
}

// Per rank r and step i: (bytes r sends to each other member, bytes each other member sends r) for the collectives
// whose per-member bytes depend on one side only.
struct Collective {
  const Plan& plan;
  const Step& step;
  Layout a, b;
  int es, g;
  double sends_each(int r) const {  // what r sends to every other member (all_gather, all_reduce)
    double v = static_cast<double>(a.local_volume(r)) * es;
    return step.kind == StepKind::kAllReduce ? 2.0 * v / g : v;
  }
  double receives_from_each(int r) const {  // what every other member sends r (reduce_scatter)
    return static_cast<double>(b.local_volume(r)) * es;
  }
};

}  // namespace

RankTotals rank_traffic(const Plan& plan) {
  const Mesh& mesh = plan.src().mesh();  // collectives: a plan on one mesh, the whole world
  const int n = mesh.world_size(), es = plan.element_size();
  RankTotals t{std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
  for (size_t i = 0; i < plan.steps().size(); ++i) {
    const Step& s = plan.steps()[i];
    if (s.kind == StepKind::kLocal) continue;
    if (s.kind == StepKind::kP2P) {
      for (const Transfer& tr : s.transfers) {
        if (tr.is_local()) continue;
        t.out[tr.sender()] += static_cast<double>(tr.bytes);
        t.in[tr.dst] += static_cast<double>(tr.bytes);
      }
      continue;
    }
    Collective c{plan, s, plan.layout_before(i), plan.layout_before(i + 1), es, mesh.group_size(s.mesh_dims)};
    if (s.hierarchical) {  // k - 1 pieces out and in on the node twice, 2 (m - 1) / m of a piece between nodes
      const NodeSplit split = node_split(mesh, s.mesh_dims, plan.topology()).value();
      const double k = split.parts, m = split.nodes;
      for (int r = 0; r < n; ++r) {
        const double piece = static_cast<double>(c.a.local_volume(r)) * es / k;
        t.out[r] += 2 * (k - 1) * piece + 2 * (m - 1) / m * piece;
        t.in[r] += 2 * (k - 1) * piece + 2 * (m - 1) / m * piece;
      }
      continue;
    }
    if (s.kind == StepKind::kAllToAll) {
      // The members' L_i+1 boxes tile the group's region, which holds r's L_i box: all of it leaves but what stays.
      for (int r = 0; r < n; ++r) {
        const Box ar = c.a.box(r), br = c.b.box(r);
        const double kept = static_cast<double>(volume(intersect(ar, br)));
        t.out[r] += (static_cast<double>(volume(ar)) - kept) * es;
        t.in[r] += (static_cast<double>(volume(br)) - kept) * es;
      }
      continue;
    }
    // Group sums of what members send each other member (all_gather, all_reduce) or receive (reduce_scatter).
    std::vector<double> sum(static_cast<size_t>(groups(mesh, s.mesh_dims)), 0.0);
    const bool by_sender = s.kind != StepKind::kReduceScatter;
    for (int r = 0; r < n; ++r)
      sum[group_id(mesh, r, s.mesh_dims)] += by_sender ? c.sends_each(r) : c.receives_from_each(r);
    for (int r = 0; r < n; ++r) {
      const double others =
          sum[group_id(mesh, r, s.mesh_dims)] - (by_sender ? c.sends_each(r) : c.receives_from_each(r));
      if (by_sender) {
        t.out[r] += (c.g - 1) * c.sends_each(r);
        t.in[r] += others;
      } else {
        t.out[r] += others;
        t.in[r] += (c.g - 1) * c.receives_from_each(r);
      }
    }
  }
  return t;
}

BlockTraffic block_traffic(const Plan& plan, size_t i, int block) {
  const Mesh& mesh = plan.src().mesh();
  const int n = mesh.world_size(), es = plan.element_size();
  BlockTraffic t;
  t.block = std::max(1, block);
  t.cells = (n + t.block - 1) / t.block;
  const size_t cells = static_cast<size_t>(t.cells);
  t.bytes.assign(cells * cells, 0.0);
  t.local.assign(cells * cells, false);
  t.peers_out.assign(n, 0);
  auto at = [&](int a, int b) -> double& { return t.bytes[static_cast<size_t>(a / t.block) * cells + b / t.block]; };
  const Step& s = plan.steps()[i];
  switch (s.kind) {
    case StepKind::kLocal: {
      const Layout after = plan.layout_before(i + 1);
      for (int r = 0; r < n; ++r) {
        at(r, r) += static_cast<double>(after.local_volume(r)) * es;
        t.local[static_cast<size_t>(r / t.block) * (cells + 1)] = true;
      }
      return t;
    }
    case StepKind::kP2P: {
      std::vector<std::pair<int, int>> pairs;
      for (const Transfer& tr : s.transfers) {
        at(tr.sender(), tr.dst) += static_cast<double>(tr.bytes);
        if (tr.is_local())
          t.local[static_cast<size_t>(tr.src / t.block) * (cells + 1)] = true;
        else
          pairs.emplace_back(tr.sender(), tr.dst);
      }
      std::sort(pairs.begin(), pairs.end());
      pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
      for (const auto& [src, dst] : pairs) ++t.peers_out[src];
      return t;
    }
    case StepKind::kAllToAll: {
      const Layout a = plan.layout_before(i), b = plan.layout_before(i + 1);
      for (int r = 0; r < n; ++r) {
        const Box ar = a.box(r);
        for (int p : mesh.group(r, s.mesh_dims)) {
          const double v = static_cast<double>(volume(intersect(ar, b.box(p)))) * es;
          if (v <= 0) continue;
          at(r, p) += v;
          t.peers_out[r] += p != r;
        }
      }
      return t;
    }
    default:
      break;
  }
  if (s.hierarchical) {  // 2 pieces to each member on the node (its two stages), 2 / m of one to each across nodes
    const detail::NodeSplit split = detail::node_split(mesh, s.mesh_dims, plan.topology()).value();
    const Layout a = plan.layout_before(i);
    const Mesh within = group_mesh(mesh, split.within), across = group_mesh(mesh, split.across);
    for (int r = 0; r < n; ++r) {
      const double piece = static_cast<double>(a.local_volume(r)) * es / split.parts;
      for (int p : within.group(r, split.within.mesh_dims))
        if (p != r) at(r, p) += 2 * piece, ++t.peers_out[r];
      for (int p : across.group(r, split.across.mesh_dims))
        if (p != r) at(r, p) += 2 * piece / split.nodes, ++t.peers_out[r];
    }
    return t;
  }
  // all_gather, reduce_scatter, all_reduce: per group, how many members (and how many bytes, for reduce_scatter)
  // each block of ranks holds; then every rank's row in O(cells).
  Collective c{plan, s, plan.layout_before(i), plan.layout_before(i + 1), es, mesh.group_size(s.mesh_dims)};
  std::map<Index, std::vector<double>> members, received;  // group -> per cell
  for (int r = 0; r < n; ++r) {
    Index id = group_id(mesh, r, s.mesh_dims);
    auto& m = members[id];
    auto& rb = received[id];
    if (m.empty()) {
      m.assign(cells, 0.0);
      rb.assign(cells, 0.0);
    }
    m[r / t.block] += 1;
    rb[r / t.block] += c.receives_from_each(r);
  }
  for (int r = 0; r < n; ++r) {
    Index id = group_id(mesh, r, s.mesh_dims);
    const std::vector<double>& m = members[id];
    const std::vector<double>& rb = received[id];
    const size_t row = static_cast<size_t>(r / t.block) * cells;
    for (size_t cb = 0; cb < cells; ++cb) {
      const bool own = cb == static_cast<size_t>(r / t.block);
      if (s.kind == StepKind::kReduceScatter)
        t.bytes[row + cb] += rb[cb] - (own ? c.receives_from_each(r) : 0.0);
      else
        t.bytes[row + cb] += c.sends_each(r) * (m[cb] - (own ? 1 : 0));
    }
    const bool sends = s.kind == StepKind::kReduceScatter ? true : c.sends_each(r) > 0;
    t.peers_out[r] = sends ? c.g - 1 : 0;
  }
  return t;
}

}  // namespace reshard::detail
