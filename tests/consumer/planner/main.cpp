// A planner-only consumer: plans a redistribution and checks the plan against the layouts, with no executor.
#include <cstdio>

#include "reshard/plan_json.hpp"
#include "reshard/planner.hpp"
#include "reshard/version.hpp"

int main() {
  using namespace reshard;
  Layout src(Mesh({2, 2}), parse_placements("S0,S1"), Dims{64, 48});
  Layout dst = src.with_placements(parse_placements("S1,S0"));
  PlanOptions options;
  options.strategy = Strategy::kP2P;
  Plan plan = make_plan(src, dst, DType::kF32, options);
  // [S0,S1] -> [S1,S0] on 2x2: ranks 1 and 2 swap their 32x24 blocks; 0 and 3 keep theirs.
  const Index expected = 2 * 32 * 24 * 4;
  Plan reloaded = plan_from_json(plan_to_json(plan));
  std::printf("reshard %s planner-only: %lld bytes moved (expected %lld)\n", kVersionString,
              static_cast<long long>(plan.bytes_moved()), static_cast<long long>(expected));
  return plan.bytes_moved() == expected && reloaded.bytes_moved() == expected ? 0 : 1;
}
