// Plans as text: plan_to_json and plan_from_json (a plan saved, reloaded and validated, the same text again),
// plan_table (what `reshard plan` prints) and plan_svg (the picture `reshard plan --svg` writes). Planner only: no
// executor, no GPU.
#include <cstdio>
#include <string>

#include "reshard/plan_format.hpp"
#include "reshard/plan_json.hpp"
#include "reshard/planner.hpp"

int main() {
  using namespace reshard;
  Layout src(Mesh({2, 2}), parse_placements("S0,S1"), Dims{64, 48});
  Plan plan = make_plan(src, src.with_placements(parse_placements("S1,S0")), DType::kBF16);

  std::string json = plan_to_json(plan);  // docs/plan-json.md: what `reshard plan --json` prints
  Plan reloaded = plan_from_json(json);   // validated as strictly as the planner's own plans
  std::string svg = plan_svg(reloaded);   // an SVG document, to write to a file
  std::fputs(plan_table(reloaded).c_str(), stdout);
  std::printf("JSON %zu bytes, SVG %zu bytes\n", json.size(), svg.size());
  return plan_to_json(reloaded) == json && svg.rfind("<svg", 0) == 0 ? 0 : 1;  // the text round-trips exactly
}
