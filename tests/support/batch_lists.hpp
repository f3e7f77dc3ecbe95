// Lists of tensors for the batch tests (host and GPU): deterministic draws of dtypes, shapes (empty, one element,
// uneven), R / S0 / S1 / P(sum) placement pairs, strategies and pipelining.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "reshard/plan.hpp"
#include "reshard/planner.hpp"

namespace reshard::testing {

// A deterministic generator (the cases must be the same on every run).
class Lcg {
 public:
  explicit Lcg(unsigned seed) : x_(seed * 2654435761u + 1) {}
  int operator()(int n) {
    x_ = x_ * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int>((x_ >> 33) % static_cast<unsigned long long>(n));
  }

 private:
  unsigned long long x_;
};

inline const std::vector<DType> kDtypes{DType::kF32, DType::kBF16, DType::kI64, DType::kU8, DType::kF16, DType::kI32};
inline const std::vector<Dims> kShapes{{0, 3}, {1, 1}, {7, 10}, {8, 8}, {5, 3}, {16, 9}, {1, 13}, {33, 4}};
inline const std::vector<Strategy> kStrategies{Strategy::kAuto, Strategy::kCollective, Strategy::kP2P,
                                               Strategy::kHybrid};

inline Placement random_placement(Lcg& rng, bool partial_ok) {
  switch (rng(partial_ok ? 4 : 3)) {
    case 0:
      return Placement::replicate();
    case 1:
      return Placement::shard(0);
    case 2:
      return Placement::shard(1);
    default:
      return Placement::partial(ReduceOp::kSum);
  }
}

// One entry planned with a strategy drawn for it (auto when the drawn one has no candidate); some entries pipelined
// in small chunks so that the batch mixes stage counts.
// `one_sided`: the plan's transport is drawn among nccl, nvlink and auto (with peer access, so auto may take nvlink),
// and half the plans are for changing buffers (staged first steps); otherwise nccl.
inline std::shared_ptr<const Plan> random_plan(Lcg& rng, const Mesh& mesh, bool one_sided = false) {
  for (;;) {  // a draw the planner refuses (no candidate at all) is drawn again
    const DType dtype = kDtypes[rng(kDtypes.size())];
    const Dims shape = kShapes[rng(kShapes.size())];
    std::vector<Placement> from, to;
    for (int d = 0; d < mesh.ndim(); ++d) {
      from.push_back(random_placement(rng, true));
      to.push_back(random_placement(rng, true));
    }
    Layout src(mesh, from, shape), dst(mesh, to, shape);
    PlanOptions o;
    o.transport = Transport::kNccl;
    if (one_sided) {
      constexpr Transport kTransports[] = {Transport::kNccl, Transport::kNvlink, Transport::kAuto};
      o.transport = kTransports[rng(3)];
      o.topology.peer_access = true;
      o.buffers_change = rng(2) == 0;
    }
    o.strategy = kStrategies[rng(kStrategies.size())];
    if (rng(4) == 0) o.pipeline_chunk_bytes = 64;
    try {
      return std::make_shared<const Plan>(make_plan(src, dst, dtype, o));
    } catch (const Error&) {
      o.strategy = Strategy::kAuto;
      try {
        return std::make_shared<const Plan>(make_plan(src, dst, dtype, o));
      } catch (const Error&) {
      }
    }
  }
}

struct BatchCase {
  std::vector<int> mesh;
  int tensors;
  unsigned seed;
};

inline std::vector<BatchCase> batch_cases() {
  const std::vector<std::vector<int>> meshes{{2}, {4}, {2, 2}, {3}, {1, 3}, {2, 1}, {2, 3}, {8}};
  const int counts[] = {1, 2, 50, 7, 30, 13, 40, 11, 3, 24};
  std::vector<BatchCase> out;
  unsigned seed = 1;
  for (size_t m = 0; m < meshes.size(); ++m)
    for (int k = 0; k < 3; ++k, ++seed) out.push_back(BatchCase{meshes[m], counts[(m * 3 + k) % 10], seed});
  return out;
}

}  // namespace reshard::testing
