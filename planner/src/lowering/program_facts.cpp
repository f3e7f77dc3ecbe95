// What the executor needs to know about the plans behind a program (RankProgram's plan facts), decided at lowering.
#include <cstdint>

#include "lowering/lowering_parts.hpp"
#include "reshard/text.hpp"

namespace reshard::detail {

void set_plan_facts(std::span<const Plan* const> plans, OneSidedCopies copies, RankProgram& prog) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a
  auto mix = [&](std::uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  mix(static_cast<std::uint64_t>(copies));
  prog.maps_peer_tensors = false;
  for (const Plan* plan : plans) {
    const std::vector<Step>& steps = plan->steps();
    mix(steps.size());
    for (size_t i = 0; i < steps.size(); ++i) {
      const Step& s = steps[i];
      mix(static_cast<std::uint64_t>(s.kind));
      mix(static_cast<std::uint64_t>(s.transport));
      mix(s.fused);
      mix(s.relayed);
      mix(s.mixed);
      mix(s.hierarchical);
      mix(s.mesh_dims.size());
      for (int d : s.mesh_dims) mix(static_cast<std::uint64_t>(d));
      // A staged first step reads the peers' workspaces only; any other one-sided step reads or writes their tensors.
      if ((s.transport == Transport::kNvlink && !(i == 0 && s.staged)) || s.mixed) prog.maps_peer_tensors = true;
    }
  }
  prog.step_signature = h;
  prog.identity = plans.size() == 1 && is_identity(*plans.front());
  prog.step_names.clear();
  if (plans.size() == 1) {
    const std::vector<Step>& steps = plans.front()->steps();
    for (size_t i = 0; i < steps.size(); ++i) {
      const Step& s = steps[i];
      prog.step_names.push_back(cat("reshard step ", i, " ", to_string(s.kind),
                                    s.kind == StepKind::kP2P ? cat("/", s.mixed ? "mixed" : to_string(s.transport),
                                                                   s.fused ? "-fused" : "", s.relayed ? "-relayed" : "")
                                                             : std::string(!s.hierarchical ? ""
                                                                           : s.mixed       ? "/hierarchical-mixed"
                                                                                           : "/hierarchical")));
    }
  } else {
    for (int i = 0; i < prog.step_count; ++i) prog.step_names.push_back(cat("reshard step ", i, " batch"));
  }
}

}  // namespace reshard::detail
