#include "reshard/run_record.hpp"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "reshard/detail/json_text.hpp"

namespace reshard {
namespace {

std::optional<double> per_time(double bytes, double us) {
  if (!(us > 0) || !std::isfinite(us)) return std::nullopt;
  return bytes / (us * 1e3);
}

std::string cell(const std::optional<double>& v, int digits) {
  return v ? fmt::format("{:.{}f}", *v, digits) : std::string("-");
}

std::string csv_number(const std::optional<double>& v) { return v ? fmt::format("{}", *v) : std::string(); }

nlohmann::ordered_json json_number(const std::optional<double>& v) {
  return v && std::isfinite(*v) ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

constexpr const char* kTableFormat =
    "{:<8} {:<10} {:<10} {:<14} {:<5} {:<22} {:>13} {:>10} {:>10} {:>9} {:>8} {:>10} {:>7} {:>9} {:>7}\n";

// The host backend carries out the one-sided (nvlink) transport with its threads in CPU memory.
bool emulated(const RunRecord& r) { return r.backend == "host" && r.transport == "nvlink"; }

}  // namespace

std::optional<double> RunRecord::algbw_GBps() const {
  if (in_place) return std::nullopt;
  return per_time(static_cast<double>(tensor_bytes), timing.median_us);
}
std::optional<double> RunRecord::busbw_GBps() const {
  if (in_place) return std::nullopt;
  return per_time(static_cast<double>(max_rank_bytes), timing.median_us);
}

std::string RunRecord::label() const { return strategy + "/" + transport + (emulated(*this) ? "-emulated" : ""); }
std::optional<double> RunRecord::percent_of_bound() const {
  if (!bound_us || !(timing.median_us > 0)) return std::nullopt;
  return 100.0 * *bound_us / timing.median_us;
}

RunRecord make_record(const Plan& plan, const RunResult& result, const TrafficBound& bound) {
  RunRecord r;
  r.mesh = plan.src().mesh().str();
  if (!(plan.dst().mesh() == plan.src().mesh())) r.mesh += "->" + plan.dst().mesh().str();  // a plan between meshes
  r.from = to_string(plan.src().placements());
  r.to = to_string(plan.dst().placements());
  r.shape = to_string(plan.src().global_shape());
  r.dtype = std::string(to_string(plan.dtype()));
  r.strategy = std::string(to_string(plan.strategy()));
  r.transport = std::string(to_string(plan.transport()));
  r.backend = std::string(to_string(result.backend));
  r.in_place = is_identity(plan);
  for (const Step& st : plan.steps()) {
    if (!r.steps.empty()) r.steps += '+';
    r.steps += to_string(st.kind);
    if (st.kind == StepKind::kP2P && st.transport == Transport::kNvlink)
      r.steps += st.fused ? "/nvlink-fused" : "/nvlink";
  }
  r.ranks = result.ranks;
  r.tensor_bytes = checked_mul(plan.src().global_volume(), plan.element_size(), "the tensor's bytes");
  r.max_rank_bytes = bound.max_rank_bytes;
  r.estimated_us = plan.estimated_us();
  r.timing = result.timing;
  r.wrong = result.wrong_elements;
  r.checked = result.checked_elements;
  r.workspace_bytes = static_cast<Index>(result.workspace_bytes);
  return r;
}

std::string record_table_header() {
  return fmt::format(kTableFormat, "# mesh", "from", "to", "shape", "dtype", "strategy", "bytes", "time(us)",
                     "graph(us)", "algbw", "busbw", "bound(us)", "%bound", "est(us)", "wrong");
}

std::string record_table_row(const RunRecord& r) {
  std::optional<double> pct = r.percent_of_bound();
  return fmt::format(kTableFormat, "  " + r.mesh, r.from, r.to, r.shape, r.dtype,
                     r.label() + (r.auto_choice ? "*" : ""), r.tensor_bytes, fmt::format("{:.1f}", r.timing.median_us),
                     cell(r.graph_us, 1), cell(r.algbw_GBps(), 2), cell(r.busbw_GBps(), 2), cell(r.bound_us, 1),
                     pct ? fmt::format("{:.1f}%", *pct) : std::string("-"), fmt::format("{:.1f}", r.estimated_us),
                     r.wrong);
}

std::string record_table_note(const RunRecord& r) { return emulated(r) ? host_emulation_note() : std::string(); }

std::string host_emulation_note() {
  return "# nvlink-emulated: the one-sided (nvlink) transport carried out by the host backend's threads in CPU memory "
         "(no GPU, no NVLink)\n";
}

std::string record_csv_header() {
  return "mesh,from,to,shape,dtype,strategy,transport,auto_choice,tensor_bytes,max_rank_bytes,estimated_us,median_us,"
         "graph_us,"
         "algbw_GBps,busbw_GBps,bound_us,wrong,checked,workspace_bytes,steps,backend,iterations,issue_us\n";
}

std::string record_csv_row(const RunRecord& r) {
  return fmt::format("\"{}\",\"{}\",\"{}\",{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", r.mesh,
                     r.from, r.to, r.shape, r.dtype, r.strategy, r.transport, r.auto_choice ? 1 : 0, r.tensor_bytes,
                     r.max_rank_bytes, r.estimated_us, r.timing.median_us, csv_number(r.graph_us),
                     csv_number(r.algbw_GBps()), csv_number(r.busbw_GBps()), csv_number(r.bound_us), r.wrong, r.checked,
                     r.workspace_bytes, r.steps, r.backend, r.timing.iterations, csv_number(r.timing.issue_us));
}

std::string record_json(const RunRecord& r) {
  // The request, the plan's figures, the measurement and its verification, in that order.
  nlohmann::ordered_json j = {{"mesh", r.mesh},
                              {"from", r.from},
                              {"to", r.to},
                              {"shape", r.shape},
                              {"dtype", r.dtype},
                              {"strategy", r.strategy},
                              {"transport", r.transport},
                              {"auto_choice", r.auto_choice},
                              {"backend", r.backend},
                              {"ranks", r.ranks},
                              {"tensor_bytes", r.tensor_bytes},
                              {"max_rank_bytes", r.max_rank_bytes},
                              {"estimated_us", json_number(r.estimated_us)},
                              {"median_us", json_number(r.timing.median_us)},
                              {"graph_us", json_number(r.graph_us)},
                              {"algbw_GBps", json_number(r.algbw_GBps())},
                              {"busbw_GBps", json_number(r.busbw_GBps())},
                              {"bound_us", json_number(r.bound_us)},
                              {"wrong", r.wrong},
                              {"checked", r.checked},
                              {"workspace_bytes", r.workspace_bytes},
                              {"steps", r.steps},
                              {"iterations", r.timing.iterations}};
  j["timing"] = {{"samples", r.timing.samples},
                 {"min_us", json_number(r.timing.min_us)},
                 {"median_us", json_number(r.timing.median_us)},
                 {"p90_us", json_number(r.timing.p90_us)},
                 {"max_us", json_number(r.timing.max_us)},
                 {"mean_us", json_number(r.timing.mean_us)},
                 {"issue_us", json_number(r.timing.issue_us)}};
  std::string out;
  detail::write_json_text(j, out, 2, 1 << 30, 1);  // depth 1 with no width limit: one line
  return out;
}

}  // namespace reshard
