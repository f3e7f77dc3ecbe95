// Fuzzes the plan JSON loader (global and rank-scoped plans): anything it accepts round-trips exactly, holds only
// finite non-negative figures, keeps every transfer inside its sender's source box and its receiver's target box,
// and lowers for every rank it covers. Seeds include the rank-scoped plan whose transfer region wraps around int64
// (issue 24) and JSON nested past the depth limit.
#include <cmath>

#include "fuzz_common.hpp"
#include "reshard/plan_json.hpp"
#include "reshard/program.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace reshard;
  std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::only_reshard_errors([&] {
    const Plan plan = fuzz::round_trip(
        text, [](const std::string& t) { return plan_from_json(t); }, plan_to_json);
    if (!std::isfinite(plan.estimated_us()) || plan.estimated_us() < 0 || plan.bytes_moved() < 0 ||
        plan.peak_workspace_bytes() < 0)
      std::abort();
    for (size_t i = 0; i < plan.steps().size(); ++i) {
      const Layout a = plan.layout_before(i), b = plan.layout_before(i + 1);
      for (const Transfer& t : plan.steps()[i].transfers)
        if (!contains(a.box(t.src), t.region) || !contains(b.box(t.dst), t.region) || is_empty(t.region)) std::abort();
    }
    if (plan.src().mesh().world_size() <= 64 && plan.src().global_volume() <= (1 << 20))
      for (int r = 0; r < plan.src().mesh().world_size(); ++r)
        if (!plan.scope_rank() || *plan.scope_rank() == r) lower(plan, r);
  });
  return 0;
}
