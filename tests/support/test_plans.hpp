// Plans for tests: the rows of a table of redistributions, one strategy's plan (or the planner's refusal of it), every
// candidate's plan, and the zero-copy p2p plan on the NCCL transport, the p2p plan on the NVLink transport.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "reshard/planner.hpp"

namespace reshard::testing {

// A row of a test's table of redistributions: the mesh, the source and target placements (text), the global shape.
struct LayoutCase {
  std::vector<int> mesh;
  const char *from, *to;
  Dims shape;

  Layout src() const { return Layout(Mesh(mesh), parse_placements(from), shape); }
  Layout dst() const { return src().with_placements(parse_placements(to)); }
};

// src -> dst planned with strategy `s`; nullopt where the planner refuses the strategy, with its message in `why`.
inline std::optional<Plan> plan_with(const Layout& src, const Layout& dst, DType t, Strategy s, std::string& why) {
  PlanOptions o;
  o.strategy = s;
  try {
    return make_plan(src, dst, t, o);
  } catch (const Error& e) {
    why = e.what();
    return std::nullopt;
  }
}

// The plan of every available candidate of src -> dst (every strategy on both transports): on the NVLink transport
// twice, with separate peer copies and with one fused kernel per rank.
inline std::vector<Plan> candidate_plans(const Layout& src, const Layout& dst, DType t) {
  std::vector<Plan> plans;
  PlanOptions o;
  const Plan automatic = make_plan(src, dst, t, o);
  for (const Candidate& c : automatic.candidates()) {
    if (!c.available) continue;
    o.strategy = c.strategy;
    o.transport = c.transport;
    if (c.transport != Transport::kNvlink) {
      plans.push_back(make_plan(src, dst, t, o));
      continue;
    }
    for (Fusion f : {Fusion::kNever, Fusion::kAlways}) {
      o.fusion = f;
      plans.push_back(make_plan(src, dst, t, o));
    }
    o.fusion = Fusion::kAuto;
  }
  return plans;
}

// The p2p plan of src -> src under placements `to`, on the NCCL transport: where a transfer is a rank's whole box it
// is sent straight from the input buffer and received straight into the output buffer (zero copy).
inline Plan p2p_over_nccl(const Layout& src, const char* to, DType t) {
  PlanOptions o;
  o.strategy = Strategy::kP2P;
  o.transport = Transport::kNccl;
  return make_plan(src, src.with_placements(parse_placements(to)), t, o);
}

// The p2p plan of src -> dst on the NVLink transport (one-sided), its steps fused or not as `fusion` says.
inline Plan p2p_over_nvlink(const Layout& src, const Layout& dst, DType t, Fusion fusion = Fusion::kAuto) {
  PlanOptions o;
  o.strategy = Strategy::kP2P;
  o.transport = Transport::kNvlink;
  o.fusion = fusion;
  return make_plan(src, dst, t, o);
}

}  // namespace reshard::testing
