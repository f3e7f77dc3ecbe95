// Random plan requests for checks that compare plans over many cases: meshes up to 4-D (some with explicit rank
// orders), uneven shards, Partial sources and targets, node sizes 1-8, peer access, memory budgets, pipeline chunks,
// low-SM, changing buffers, fusion and strategies. Every value is drawn from the caller's generator in a fixed order,
// so a seed gives the same requests on every run. Used by tests/planner/planner_equivalence_test.cpp and
// bench/planner/plan_hash.cpp.
#pragma once

#include <algorithm>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "reshard/plan_json.hpp"
#include "reshard/planner.hpp"

namespace reshard::testing {

// How far the draws reach.
struct RequestRanges {
  int max_mesh_dim = 5;             // ranks along one mesh dim
  bool sometimes_64_ranks = false;  // a quarter of the meshes up to 64 ranks (the others, and all without it: 24)
  bool large_extents = false;       // half of the extents that are not tiny (0..7) from 100..5000 instead of 8..40
  int max_budget_bytes = 4000;      // memory budget, where one is set (a sixth of the requests)
  int max_chunk_bytes = 512;        // pipeline chunk, where one is set (a sixth of the requests)
  bool max_collectives = false;     // a quarter of the requests cap the collectives at 0..4
};

struct PlanRequest {
  Layout src, dst;
  DType dtype;
  PlanOptions options;
  int rank;  // a rank of the mesh, for a rank plan
};

// Request `index` (its dtype cycles with the index) drawn from `rng`.
inline PlanRequest random_plan_request(std::mt19937& rng, int index, const RequestRanges& ranges) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const DType dtypes[] = {DType::kBF16, DType::kF32, DType::kF64, DType::kU8};
  std::vector<int> mesh_shape(pick(1, 4));
  int ranks = 1;
  const int cap = ranges.sometimes_64_ranks && pick(0, 3) == 0 ? 64 : 24;
  for (int& m : mesh_shape) {
    m = pick(1, std::max(1, std::min(ranges.max_mesh_dim, cap / ranks)));
    ranks *= m;
  }
  std::vector<int> order(ranks);
  std::iota(order.begin(), order.end(), 0);
  if (pick(0, 4) == 0) std::shuffle(order.begin(), order.end(), rng);
  const Mesh mesh = pick(0, 4) == 0 ? Mesh(mesh_shape, order) : Mesh(mesh_shape);
  const int nd = pick(1, 3);
  Dims shape(nd);
  for (int d = 0; d < nd; ++d)
    shape[d] = pick(0, 3) == 0 ? pick(0, 7) : !ranges.large_extents || pick(0, 1) ? pick(8, 40) : pick(100, 5000);
  auto random_placements = [&](int partial_weight) {
    std::vector<Placement> ps;
    const auto op = static_cast<ReduceOp>(pick(0, 3));
    for (size_t k = 0; k < mesh_shape.size(); ++k) {
      const int c = pick(0, nd + partial_weight);
      ps.push_back(c == 0 ? Placement::replicate() : c <= nd ? Placement::shard(c - 1) : Placement::partial(op));
    }
    return ps;
  };
  Layout src(mesh, random_placements(1), shape);
  Layout dst(mesh, random_placements(pick(0, 1)), shape);
  PlanOptions o;
  o.topology.ranks_per_node = pick(1, 8);
  o.topology.peer_access = pick(0, 5) != 0;
  const int strategy = pick(0, 7);
  o.strategy = strategy < 5 ? Strategy::kAuto : static_cast<Strategy>(strategy - 4);
  if (pick(0, 5) == 0) o.memory_budget_bytes = pick(0, ranges.max_budget_bytes);
  if (pick(0, 5) == 0) o.pipeline_chunk_bytes = pick(1, ranges.max_chunk_bytes);
  o.low_sm = pick(0, 3) == 0;
  o.buffers_change = pick(0, 3) == 0;
  o.fusion = static_cast<Fusion>(pick(0, 2));
  if (ranges.max_collectives && pick(0, 3) == 0) o.max_collectives = pick(0, 4);
  const int rank = pick(0, ranks - 1);
  return PlanRequest{std::move(src), std::move(dst), dtypes[index % 4], o, rank};
}

// The plan's JSON, or the error it raised.
inline std::string outcome(const std::function<Plan()>& plan) {
  try {
    return plan_to_json(plan());
  } catch (const Error& e) {
    return std::string("error: ") + e.what();
  }
}

}  // namespace reshard::testing
