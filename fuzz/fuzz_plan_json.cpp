// Fuzzes the plan JSON loader: anything it accepts round-trips exactly and lowers for every rank.
#include "fuzz_common.hpp"
#include "reshard/plan_json.hpp"
#include "reshard/program.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace reshard;
  std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::only_reshard_errors([&] {
    Plan plan = plan_from_json(text);
    std::string dumped = plan_to_json(plan);
    if (plan_to_json(plan_from_json(dumped)) != dumped) std::abort();
    if (plan.src().mesh().size() <= 64 && plan.src().global_volume() <= (1 << 20))
      for (int r = 0; r < plan.src().mesh().size(); ++r)
        if (!plan.scope_rank() || *plan.scope_rank() == r) lower(plan, r);
  });
  return 0;
}
