#include "plan/route_text.hpp"

#include "reshard/dims.hpp"

namespace reshard::detail {

std::string route_text(const std::vector<Step>& steps) {
  return route_text(steps.size(), [&](size_t i) -> const Step& { return steps[i]; });
}

std::string route_text(size_t n, const std::function<const Step&(size_t)>& step) {
  if (n == 0) return "";
  std::string s = to_string(step(0).from);
  for (size_t i = 0; i < n; ++i) {
    const Step& st = step(i);
    s += " -";
    s += to_string(st.kind);
    if (st.kind == StepKind::kP2P && st.transport == Transport::kNvlink) s += st.fused ? "/nvlink-fused" : "/nvlink";
    if (st.mixed) s += "/mixed";
    if (st.relayed) s += "/relayed";
    if (st.hierarchical) s += "/hierarchical";
    if (!st.mesh_dims.empty()) {
      s += "[";
      s += join(st.mesh_dims);
      s += "]";
    }
    s += "-> " + to_string(st.to);
  }
  return s;
}

}  // namespace reshard::detail
