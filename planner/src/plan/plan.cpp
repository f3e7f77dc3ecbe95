#include "reshard/plan.hpp"

#include "reshard/text.hpp"

namespace reshard {

std::string_view to_string(Strategy s) {
  switch (s) {
    case Strategy::kAuto:
      return "auto";
    case Strategy::kCollective:
      return "collective";
    case Strategy::kP2P:
      return "p2p";
    case Strategy::kHybrid:
      return "hybrid";
  }
  return "?";
}

std::string_view to_string(StepKind k) {
  switch (k) {
    case StepKind::kP2P:
      return "p2p";
    case StepKind::kAllGather:
      return "all_gather";
    case StepKind::kAllToAll:
      return "all_to_all";
    case StepKind::kReduceScatter:
      return "reduce_scatter";
    case StepKind::kAllReduce:
      return "all_reduce";
    case StepKind::kLocal:
      return "local";
  }
  return "?";
}

std::string_view to_string(Transport t) {
  switch (t) {
    case Transport::kAuto:
      return "auto";
    case Transport::kNccl:
      return "nccl";
    case Transport::kNvlink:
      return "nvlink";
  }
  return "?";
}

Transport parse_transport(std::string_view text) {
  for (Transport t : {Transport::kAuto, Transport::kNccl, Transport::kNvlink})
    if (to_string(t) == text) return t;
  fail(ErrorKind::kParse, cat("unknown transport '", printable(text), "'; expected auto, nccl or nvlink"));
}

Fusion parse_fusion(std::string_view text) {
  if (text == "auto") return Fusion::kAuto;
  if (text == "always") return Fusion::kAlways;
  if (text == "never") return Fusion::kNever;
  fail(ErrorKind::kParse, cat("unknown fusion '", printable(text), "'; expected auto, always or never"));
}

Relay parse_relay(std::string_view text) {
  if (text == "auto") return Relay::kAuto;
  if (text == "always") return Relay::kAlways;
  if (text == "never") return Relay::kNever;
  fail(ErrorKind::kParse, cat("unknown relay '", printable(text), "'; expected auto, always or never"));
}

Strategy parse_strategy(std::string_view text) {
  for (Strategy s : {Strategy::kAuto, Strategy::kCollective, Strategy::kP2P, Strategy::kHybrid})
    if (to_string(s) == text) return s;
  fail(ErrorKind::kParse, cat("unknown strategy '", printable(text), "'; expected auto, collective, p2p or hybrid"));
}

StepKind parse_step_kind(std::string_view text) {
  for (StepKind k : {StepKind::kP2P, StepKind::kAllGather, StepKind::kAllToAll, StepKind::kReduceScatter,
                     StepKind::kAllReduce, StepKind::kLocal})
    if (to_string(k) == text) return k;
  fail(ErrorKind::kParse, cat("unknown step kind '", printable(text),
                              "'; expected p2p, all_gather, all_to_all, reduce_scatter, all_reduce or local"));
}

bool is_communication(StepKind k) { return k != StepKind::kLocal; }

std::vector<Placement> canonical_placements(const Mesh& mesh, const std::vector<Placement>& placements) {
  std::vector<Placement> out = placements;
  for (int k = 0; k < mesh.ndim() && k < static_cast<int>(out.size()); ++k)
    if (mesh.dim_size(k) == 1) out[k] = Placement::replicate();
  return out;
}

Plan::Plan(PlanSpec spec) : s_(std::move(spec)) { validate_plan(s_); }

Layout Plan::layout_before(size_t i) const { return step_layout(s_.src, s_.dst, s_.steps, i); }

Layout step_layout(const Layout& src, const Layout& dst, const std::vector<Step>& steps, size_t i) {
  if (i < steps.size()) return (i == 0 ? src : dst).with_placements(steps[i].from);
  return dst.with_placements(steps.back().to);
}

Transport Plan::transport() const {
  for (const Step& s : s_.steps)
    if (s.transport == Transport::kNvlink) return Transport::kNvlink;
  return Transport::kNccl;
}

// A plan that converts the dtype writes every element anew: never an identity.
bool is_identity(const Plan& plan) {
  const Layout& a = plan.src();
  const Layout& b = plan.dst();
  return !plan.converts() && plan.bytes_moved() == 0 && a.mesh() == b.mesh() && a.global_shape() == b.global_shape() &&
         canonical_placements(a.mesh(), a.placements()) == canonical_placements(b.mesh(), b.placements());
}

int Plan::communication_steps() const {
  int n = 0;
  for (const Step& s : s_.steps) n += is_communication(s.kind) ? 1 : 0;
  return n;
}

}  // namespace reshard
