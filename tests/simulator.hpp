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

// The local tensors of a layout without Partial placements.
inline std::vector<Tensor> distribute(const Layout& layout) {
  std::vector<Tensor> locals(layout.mesh().size());
  for (int r = 0; r < layout.mesh().size(); ++r) {
    Box b = layout.box(r);
    locals[r].resize(volume(b));
    for_each_element(b,
                     [&](const Dims& x, Index i) { locals[r][i] = pattern(global_index(layout.global_shape(), x)); });
  }
  return locals;
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
    if (step.kind == StepKind::kP2P) {
      for (const Transfer& t : step.transfers) {
        Box from = a.box(t.src), to = b.box(t.dst);
        for_each_element(t.region, [&](const Dims& x, Index) {
          double& slot = next[t.dst][local_index(to, x)];
          if (!std::isnan(slot)) fail_step(cat("rank ", t.dst, " element ", to_list_string(x), " written twice"));
          slot = cur[t.src][local_index(from, x)];
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
              next[r][i] = cur[r][local_index(from, x)];
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
