// Reference simulator: executes a plan on per-rank CPU buffers by the definitions of its steps, independently of
// the planner's lowering and overlap code (it uses only Layout boxes), and checks every element.
//
// Values are doubles holding integers (exact). The global tensor holds value(i) = pattern(i) at row-major index i.
// A Partial source holds, on each rank, a contribution; the contributions reduce (over the Partial mesh dims) to
// value(i).
#pragma once

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "reshard/partial.hpp"
#include "reshard/plan.hpp"

namespace reshard::testing {

using Tensor = std::vector<double>;

inline double pattern(Index i) { return static_cast<double>((i * 7919) % 100003) + 1.0; }

inline Index global_index(const Dims& shape, const Dims& x) {
  Index idx = 0;
  for (int d = 0; d < shape.size(); ++d) idx = idx * shape[d] + x[d];
  return idx;
}

// Calls f(global coordinate, local index) for every element of a box, in row-major order.
template <class F>
void for_each_element(const Box& box, F f) {
  Index n = volume(box);
  if (n == 0) return;
  Dims x = box.offset;
  for (Index i = 0; i < n; ++i) {
    f(x, i);
    for (int d = box.ndim() - 1; d >= 0; --d) {
      if (++x[d] < box.offset[d] + box.shape[d]) break;
      x[d] = box.offset[d];
    }
  }
}

inline Index local_index(const Box& box, const Dims& x) {
  Index idx = 0;
  for (int d = 0; d < box.ndim(); ++d) idx = idx * box.shape[d] + (x[d] - box.offset[d]);
  return idx;
}

// The Partial mesh dims (size > 1) of a layout, their one op, and a rank's contribution index over them.
struct PartialInfo {
  std::vector<int> dims;
  ReduceOp op = ReduceOp::kSum;
  Index count = 1;
  Index index_of(const Mesh& mesh, int rank) const {
    Dims c = mesh.coord_of(rank);
    Index q = 0;
    for (int k : dims) q = q * mesh.dim_size(k) + c[k];
    return q;
  }
};
inline PartialInfo partial_info(const Layout& layout) {
  PartialInfo p;
  for (int k = 0; k < layout.mesh().ndim(); ++k) {
    const Placement& pl = layout.placement(k);
    if (!pl.is_partial() || layout.mesh().dim_size(k) == 1) continue;
    p.dims.push_back(k);
    p.op = pl.op();
    p.count *= layout.mesh().dim_size(k);
  }
  return p;
}

// Contribution q of `count` for value v: they reduce to v under op (small integers: exact in doubles).
inline double contribution(double v, Index q, Index count, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return q == 0 ? v - static_cast<double>(count - 1) : 1.0;
    case ReduceOp::kAvg:
      return q == 0 ? v - static_cast<double>(count - 1) : v + 1.0;
    case ReduceOp::kMax:
      return q == 0 ? v : v - 1.0;
    case ReduceOp::kMin:
      return q == 0 ? v : v + 1.0;
  }
  return v;
}

inline double combine(double a, double b, ReduceOp op) {
  return op == ReduceOp::kMax ? std::max(a, b) : op == ReduceOp::kMin ? std::min(a, b) : a + b;
}

// The local tensors of a layout; on Partial mesh dims every rank holds its contribution.
inline std::vector<Tensor> distribute(const Layout& layout) {
  std::vector<Tensor> locals(layout.mesh().size());
  const PartialInfo p = partial_info(layout);
  for (int r = 0; r < layout.mesh().size(); ++r) {
    Box b = layout.box(r);
    locals[r].resize(volume(b));
    const Index q = p.index_of(layout.mesh(), r);
    for_each_element(b, [&](const Dims& x, Index i) {
      locals[r][i] = contribution(pattern(global_index(layout.global_shape(), x)), q, p.count, p.op);
    });
  }
  return locals;
}

// Every element of every rank of a redistribution from `src` against what its target layout must hold: the global
// tensor, or on kept Partial dims the reduction of the source contributions over the reduced dims, and on created
// ones the partition of the value (partial.hpp; floating semantics unless `dtype` is an integer type). Values that
// are not exact (partitions, averages) compare within 1e-9 relative.
inline Index count_wrong(const Layout& src, const Layout& layout, const std::vector<Tensor>& locals, DType dtype,
                         std::string* first_error) {
  const Mesh& mesh = layout.mesh();
  const PartialInfo sp = partial_info(src);
  const PartialRoles roles = partial_roles(mesh, canonical_placements(mesh, src.placements()),
                                           canonical_placements(mesh, layout.placements()));
  Index wrong = 0;
  for (int r = 0; r < mesh.size(); ++r) {
    Box b = layout.box(r);
    if (static_cast<Index>(locals[r].size()) != volume(b)) {
      if (first_error && first_error->empty())
        *first_error = cat("rank ", r, " holds ", locals[r].size(), " elements, expected ", volume(b));
      wrong += volume(b);
      continue;
    }
    const Dims coord = mesh.coord_of(r);
    const Partition part =
        partition_for(mesh, canonical_placements(mesh, layout.placements()), roles.created, dtype, coord);
    // Source contributions this rank's value reduces (kept dims: its own coordinates).
    std::vector<Index> qs;
    if (!roles.kept.empty()) {
      for (Index c = 0; c < roles.contributions; ++c) {
        Dims at = coord;
        Index rest = c;
        for (int j = static_cast<int>(roles.reduced.size()) - 1; j >= 0; --j) {
          at[roles.reduced[j]] = rest % mesh.dim_size(roles.reduced[j]);
          rest /= mesh.dim_size(roles.reduced[j]);
        }
        Index q = 0;
        for (int k : sp.dims) q = q * mesh.dim_size(k) + at[k];
        qs.push_back(q);
      }
    }
    for_each_element(b, [&](const Dims& x, Index i) {
      const double v = pattern(global_index(layout.global_shape(), x));
      double want = v;
      for (size_t j = 0; j < qs.size(); ++j) {
        double c = contribution(v, qs[j], sp.count, sp.op);
        want = j == 0 ? c : combine(want, c, sp.op);
      }
      if (!qs.empty() && sp.op == ReduceOp::kAvg) want /= static_cast<double>(qs.size());
      if (part.zero) want = 0;
      want /= static_cast<double>(part.divisor);
      if (!(std::abs(locals[r][i] - want) <= 1e-9 * (std::abs(want) + 1))) {
        if (first_error && first_error->empty())
          *first_error = cat("rank ", r, " element ", to_list_string(x), ": got ", locals[r][i], " want ", want);
        ++wrong;
      }
    });
  }
  return wrong;
}

// Every element of every rank against the global tensor; returns the number of wrong elements.
inline Index count_wrong(const Layout& layout, const std::vector<Tensor>& locals, std::string* first_error) {
  Index wrong = 0;
  for (int r = 0; r < layout.mesh().size(); ++r) {
    Box b = layout.box(r);
    if (static_cast<Index>(locals[r].size()) != volume(b)) {
      if (first_error && first_error->empty())
        *first_error = cat("rank ", r, " holds ", locals[r].size(), " elements, expected ", volume(b));
      wrong += volume(b);
      continue;
    }
    for_each_element(b, [&](const Dims& x, Index i) {
      double want = pattern(global_index(layout.global_shape(), x));
      if (locals[r][i] != want) {
        if (first_error && first_error->empty())
          *first_error = cat("rank ", r, " element ", to_list_string(x), ": got ", locals[r][i], " want ", want);
        ++wrong;
      }
    });
  }
  return wrong;
}

// Runs every step of the plan. Throws std::runtime_error naming the step when a step's definition cannot be met
// (a rank needs data no allowed peer holds, an element is written twice or never).
inline std::vector<Tensor> simulate(const Plan& plan, std::vector<Tensor> cur) {
  const Mesh& mesh = plan.src().mesh();
  const int n = mesh.size();
  const double kUnset = std::nan("");
  for (size_t s = 0; s < plan.steps().size(); ++s) {
    const Step& step = plan.steps()[s];
    Layout a = plan.layout_before(s), b = plan.layout_before(s + 1);
    std::vector<Tensor> next(n);
    for (int r = 0; r < n; ++r) next[r].assign(volume(b.box(r)), kUnset);
    auto fail_step = [&](const std::string& what) {
      throw std::runtime_error(cat("step ", s, " (", to_string(step.kind), "): ", what));
    };
    const PartialRoles roles =
        partial_roles(mesh, canonical_placements(mesh, step.from), canonical_placements(mesh, step.to));
    if (step.kind == StepKind::kP2P && roles.contributions > 1) {
      // Reducing p2p: each element of a receiver gets exactly one contribution per coordinate of the reduced dims.
      std::vector<std::vector<Index>> count(n);
      std::vector<std::vector<std::vector<char>>> seen(n);
      for (int r = 0; r < n; ++r) count[r].assign(next[r].size(), 0);
      for (const Transfer& t : step.transfers) {
        Box from = a.box(t.src), to = b.box(t.dst);
        const Dims sc = mesh.coord_of(t.src), dc = mesh.coord_of(t.dst);
        for (int k : roles.kept)
          if (sc[k] != dc[k]) fail_step(cat("rank ", t.src, " sends a kept contribution to rank ", t.dst));
        for_each_element(t.region, [&](const Dims& x, Index) {
          const Index li = local_index(to, x);
          double& slot = next[t.dst][li];
          const double v = cur[t.src][local_index(from, x)];
          slot = count[t.dst][li] == 0 ? v : combine(slot, v, roles.reduce_op);
          ++count[t.dst][li];
        });
      }
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < next[r].size(); ++i) {
          if (count[r][i] == 0) continue;
          if (count[r][i] != roles.contributions)
            fail_step(cat("rank ", r, " element ", i, " got ", count[r][i], " contributions, expected ",
                          roles.contributions));
          if (roles.reduce_op == ReduceOp::kAvg) next[r][i] /= static_cast<double>(roles.contributions);
        }
    } else if (step.kind == StepKind::kP2P) {
      // Direct transfers first; then relayed ones, each out of its relay's L_i+1 tensor as the first phase left it.
      for (const Transfer& t : step.transfers) {
        if (t.is_relayed()) continue;
        Box from = a.box(t.src), to = b.box(t.dst);
        for_each_element(t.region, [&](const Dims& x, Index) {
          double& slot = next[t.dst][local_index(to, x)];
          if (!std::isnan(slot)) fail_step(cat("rank ", t.dst, " element ", to_list_string(x), " written twice"));
          slot = cur[t.src][local_index(from, x)];
        });
      }
      const std::vector<Tensor> first_phase = next;
      for (const Transfer& t : step.transfers) {
        if (!t.is_relayed()) continue;
        Box from = b.box(t.via), to = b.box(t.dst);
        for_each_element(t.region, [&](const Dims& x, Index) {
          double& slot = next[t.dst][local_index(to, x)];
          if (!std::isnan(slot)) fail_step(cat("rank ", t.dst, " element ", to_list_string(x), " written twice"));
          slot = first_phase[t.via][local_index(from, x)];
          if (std::isnan(slot))
            fail_step(cat("rank ", t.via, " relays element ", to_list_string(x), " before it holds it"));
        });
      }
    } else {
      for (int r = 0; r < n; ++r) {
        Box to = b.box(r);
        std::vector<int> group = step.mesh_dims.empty() ? std::vector<int>{r} : mesh.group(r, step.mesh_dims);
        for_each_element(to, [&](const Dims& x, Index i) {
          switch (step.kind) {
            case StepKind::kLocal: {
              Box from = a.box(r);
              if (!contains(from, Box{x, Dims(x.size(), 1)}))
                fail_step(cat("rank ", r, " does not hold ", to_list_string(x)));
              const Partition part = partition_for(mesh, canonical_placements(mesh, step.to), roles.created,
                                                   plan.dtype(), mesh.coord_of(r));
              next[r][i] = part.zero ? 0.0 : cur[r][local_index(from, x)] / static_cast<double>(part.divisor);
              break;
            }
            case StepKind::kAllGather:
            case StepKind::kAllToAll: {
              bool found = false;
              for (int g : group) {
                Box from = a.box(g);
                if (!contains(from, Box{x, Dims(x.size(), 1)})) continue;
                next[r][i] = cur[g][local_index(from, x)];
                found = true;
                break;
              }
              if (!found) fail_step(cat("rank ", r, " needs ", to_list_string(x), " which no group member holds"));
              break;
            }
            case StepKind::kReduceScatter:
            case StepKind::kAllReduce: {
              ReduceOp op = step.from[step.mesh_dims.front()].op();
              double acc = 0;
              for (size_t j = 0; j < group.size(); ++j) {
                Box from = a.box(group[j]);
                if (!contains(from, Box{x, Dims(x.size(), 1)}))
                  fail_step(cat("rank ", group[j], " lacks ", to_list_string(x)));
                double v = cur[group[j]][local_index(from, x)];
                if (j == 0)
                  acc = v;
                else if (op == ReduceOp::kSum || op == ReduceOp::kAvg)
                  acc += v;
                else if (op == ReduceOp::kMax)
                  acc = std::max(acc, v);
                else
                  acc = std::min(acc, v);
              }
              if (op == ReduceOp::kAvg) acc /= static_cast<double>(group.size());
              next[r][i] = acc;
              break;
            }
            case StepKind::kP2P:
              break;
          }
        });
      }
    }
    for (int r = 0; r < n; ++r)
      for (double v : next[r])
        if (std::isnan(v)) fail_step(cat("rank ", r, " has elements no transfer wrote"));
    cur = std::move(next);
  }
  return cur;
}

// The minimum bytes any plan must move: every element a rank needs and does not hold.
inline Index minimum_bytes(const Layout& src, const Layout& dst, int element_size) {
  Index total = 0;
  for (int r = 0; r < src.mesh().size(); ++r) {
    Box need = dst.box(r);
    total += volume(need) - volume(intersect(need, src.box(r)));
  }
  return total * element_size;
}

}  // namespace reshard::testing
