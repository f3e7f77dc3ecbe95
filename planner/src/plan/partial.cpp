#include "reshard/partial.hpp"

#include <algorithm>

namespace reshard {

PartialRoles partial_roles(const Mesh& mesh, const std::vector<Placement>& from, const std::vector<Placement>& to) {
  PartialRoles roles;
  bool have_op = false;
  for (int k = 0; k < mesh.ndim(); ++k) {
    if (mesh.dim_size(k) == 1) continue;
    const Placement &x = from.at(k), &y = to.at(k);
    if (x.is_partial() && x == y) {
      roles.kept.push_back(k);
    } else if (x.is_partial()) {
      roles.reduced.push_back(k);
      roles.contributions *= mesh.dim_size(k);
      if (have_op && x.op() != roles.reduce_op) roles.mixed_reduce_ops = true;
      roles.reduce_op = x.op();
      have_op = true;
    }
    if (y.is_partial() && !(x == y)) roles.created.push_back(k);
  }
  return roles;
}

PartialRoles partial_roles(const Layout& from, const Layout& to) {
  // A mesh on a subset of the world is planned as between meshes (cross_mesh.hpp): nothing is kept there either.
  if (from.mesh() == to.mesh() && from.mesh().world_size() == from.mesh().size())
    return partial_roles(from.mesh(), from.placements(), to.placements());
  PartialRoles roles;
  bool have_op = false;
  for (int k = 0; k < from.mesh().ndim(); ++k) {
    const Placement& x = from.placement(k);
    if (from.mesh().dim_size(k) == 1 || !x.is_partial()) continue;
    roles.reduced.push_back(k);
    roles.contributions *= from.mesh().dim_size(k);
    if (have_op && x.op() != roles.reduce_op) roles.mixed_reduce_ops = true;
    roles.reduce_op = x.op();
    have_op = true;
  }
  for (int k = 0; k < to.mesh().ndim(); ++k)
    if (to.mesh().dim_size(k) > 1 && to.placement(k).is_partial()) roles.created.push_back(k);
  return roles;
}

std::vector<Placement> without_created_partials(const Mesh& mesh, const std::vector<Placement>& from,
                                                const std::vector<Placement>& to) {
  std::vector<Placement> out = to;
  for (int k : partial_roles(mesh, from, to).created) out[k] = Placement::replicate();
  return out;
}

bool reduction_exact(const Mesh& mesh, const std::vector<Placement>& from, const std::vector<Placement>& to,
                     const std::vector<Placement>& target, DType dtype, bool collective) {
  const PartialRoles step = partial_roles(mesh, from, to);
  if (step.reduced.empty() || step.reduce_op != ReduceOp::kAvg || is_floating(dtype)) return true;
  if (collective && element_size(dtype) == 1) return false;
  for (int k = 0; k < mesh.ndim(); ++k) {
    if (mesh.dim_size(k) == 1 || !(from[k] == Placement::partial(ReduceOp::kAvg))) continue;
    const bool reduced_now = std::find(step.reduced.begin(), step.reduced.end(), k) != step.reduced.end();
    if (!reduced_now && !(target[k] == from[k])) return false;
  }
  return true;
}

Partition partition_for(const Mesh& mesh, const std::vector<Placement>& to, const std::vector<int>& dims, DType dtype,
                        const Dims& coord) {
  Partition p;
  for (int k : dims) {
    if (to.at(k).op() != ReduceOp::kSum) continue;
    if (is_floating(dtype))
      p.divisor *= mesh.dim_size(k);
    else if (coord[k] != 0)
      p.zero = true;
  }
  return p;
}

}  // namespace reshard
