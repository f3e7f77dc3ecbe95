// The plan as a table: what was chosen and why, every candidate, every step (with its pipeline stages), and each
// rank's traffic. Large meshes are summarised: the busiest ranks, never a rank x rank matrix.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "report/node_traffic.hpp"
#include "report/plan_traffic.hpp"
#include "reshard/plan_format.hpp"
#include "reshard/program.hpp"
#include "reshard/text.hpp"

namespace reshard {
namespace {

constexpr size_t kMaxListedTransfers = 24;
constexpr int kMaxListedRanks = 32;
constexpr int kMaxLoweredRanks = 64;  // pipeline stages are counted on the lowered programs of this many ranks

std::string dims_text(const std::vector<int>& dims) { return dims.empty() ? "-" : join(dims); }

// A candidate's name: its strategy, and the transport where both are offered (collectives always run on NCCL).
std::string label(Strategy s, Transport t) {
  return s == Strategy::kCollective ? std::string(to_string(s)) : cat(to_string(s), "/", to_string(t));
}
std::string label(const Candidate& c) { return label(c.strategy, c.transport); }

bool is_chosen(const Plan& plan, const Candidate& c) {
  return c.available && c.strategy == plan.strategy() &&
         (c.strategy == Strategy::kCollective || c.transport == plan.transport());
}

std::string why(const Plan& plan) {
  const Candidate* chosen = nullptr;
  for (const Candidate& c : plan.candidates())
    if (is_chosen(plan, c)) chosen = &c;
  if (!chosen) return "why: loaded from a file without candidates";
  std::string out = fmt::format("why: {} at {:.1f} us", label(*chosen), chosen->estimated_us);
  for (const Candidate& c : plan.candidates()) {
    if (&c == chosen) continue;
    if (!c.available) {
      out += fmt::format("; {} unavailable ({})", label(c), printable(c.reason));
    } else if (!c.fits_budget) {
      out += fmt::format("; {} needs {} of workspace, over the budget", label(c),
                         human_bytes(static_cast<double>(c.peak_workspace_bytes)));
    } else if (c.estimated_us == chosen->estimated_us) {
      out += fmt::format("; {} as fast ({:.1f} us)", label(c), c.estimated_us);
    } else if (c.estimated_us > chosen->estimated_us) {
      out += fmt::format("; {:.2f}x faster than {} ({:.1f} us)", c.estimated_us / std::max(chosen->estimated_us, 1e-9),
                         label(c), c.estimated_us);
    } else {
      out += fmt::format("; {} would be faster ({:.1f} us) but was not requested", label(c), c.estimated_us);
    }
  }
  return out;
}

// Pipeline stages of each step: the most any rank's lowered program uses (ranks 0..kMaxLoweredRanks-1 of a larger
// mesh; the plan's own rank for a rank's plan). All ones when the plan is not pipelined.
struct Stages {
  std::vector<int> per_step;
  int ranks_counted = 0;
  bool all_ranks = true;
};

Stages pipeline_stages(const Plan& plan) {
  Stages st;
  st.per_step.assign(plan.steps().size(), 1);
  if (plan.pipeline_chunk_bytes() <= 0) return st;
  std::vector<int> ranks;
  if (plan.scope_rank()) {
    ranks.push_back(*plan.scope_rank());
  } else {
    const int n = plan.src().mesh().world_size();
    ranks.resize(std::min(n, kMaxLoweredRanks));
    std::iota(ranks.begin(), ranks.end(), 0);
    st.all_ranks = n <= kMaxLoweredRanks;
  }
  for (int r : ranks) {
    // A pipelined step's stages are its exchanges (one per chunk).
    const RankProgram p = lower(plan, r);
    std::vector<int> exchanges(st.per_step.size(), 0);
    for (const Op& op : p.ops)
      if (std::holds_alternative<Exchange>(op.body) && op.step >= 0 && op.step < static_cast<int>(exchanges.size()))
        ++exchanges[op.step];
    for (size_t i = 0; i < exchanges.size(); ++i) st.per_step[i] = std::max(st.per_step[i], exchanges[i]);
  }
  st.ranks_counted = static_cast<int>(ranks.size());
  return st;
}

}  // namespace

std::string human_bytes(double bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024 && u < 6) {
    bytes /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.1f} {}", bytes, kUnits[u]);
}

std::string plan_table(const Plan& plan) {
  const Mesh& mesh = plan.src().mesh();
  const int n = mesh.world_size();
  const double tensor_bytes = static_cast<double>(plan.src().global_volume()) * plan.element_size();
  // A plan between meshes names the target mesh too.
  const std::string target_mesh = mesh == plan.dst().mesh() ? std::string() : plan.dst().mesh().str() + " ";
  std::string os = fmt::format("plan   {} [{}] -> {}[{}], {} {} ({}), {} ranks per node, profile {}\n", mesh.str(),
                               to_string(plan.src().placements()), target_mesh, to_string(plan.dst().placements()),
                               to_string(plan.src().global_shape()), to_string(plan.dtype()), human_bytes(tensor_bytes),
                               plan.topology().ranks_per_node, printable(plan.profile_name()));
  if (plan.scope_rank()) os += fmt::format("scope  transfers of rank {} only\n", *plan.scope_rank());
  if (plan.converts())
    os += fmt::format("dtype  {} -> {}: converted by the receiver as it writes its target (source bytes on the wire)\n",
                      to_string(plan.dtype()), to_string(plan.target_dtype()));
  if (plan.low_sm())
    os += "low-SM priced to run beside compute: SM kernels' time x the profile's low_sm_kernel_factor\n";
  os += fmt::format("chose  {}: {:.1f} us estimated, {} moved between ranks, peak workspace {} per rank",
                    label(plan.strategy(), plan.transport()), plan.estimated_us(),
                    human_bytes(static_cast<double>(plan.bytes_moved())),
                    human_bytes(static_cast<double>(plan.peak_workspace_bytes())));
  if (plan.memory_budget_bytes())
    os += fmt::format(" (budget {})", human_bytes(static_cast<double>(*plan.memory_budget_bytes())));
  os += "\n";
  if (detail::spans_nodes(plan)) {
    const detail::NodeTraffic nodes = detail::node_traffic(plan);
    os += fmt::format(
        "nodes  {} cross between nodes; the layouts need {}\n", human_bytes(static_cast<double>(nodes.crossing)),
        nodes.minimum ? cat(human_bytes(static_cast<double>(*nodes.minimum)), " at least")
                      : std::string("(not computed: a Partial target or one kept, or a very large world)"));
  }
  const Stages stages = pipeline_stages(plan);
  if (plan.pipeline_chunk_bytes() > 0) {
    const int most = *std::max_element(stages.per_step.begin(), stages.per_step.end());
    os += fmt::format("pipe   chunks of {}: transfers that need packing run in up to {} stages (two scratch slots){}\n",
                      human_bytes(static_cast<double>(plan.pipeline_chunk_bytes())), most,
                      stages.all_ranks ? "" : fmt::format(", counted on ranks 0-{}", stages.ranks_counted - 1));
  }
  os += why(plan) + "\n\ncandidates\n";
  constexpr const char* kCand = "{}{:<16}{:<12}{:<7}{:<13}{:<13}{}\n";
  os += fmt::format(kCand, "  ", "strategy", "est. us", "steps", "moved", "workspace", "route");
  for (const Candidate& c : plan.candidates()) {
    const char* mark = is_chosen(plan, c) ? "* " : "  ";
    if (!c.available) {
      os += fmt::format("{}{:<16}unavailable: {}\n", mark, label(c), printable(c.reason));
      continue;
    }
    os += fmt::format(kCand, mark, label(c), fmt::format("{:.1f}", c.estimated_us), c.steps,
                      human_bytes(static_cast<double>(c.bytes_moved)),
                      human_bytes(static_cast<double>(c.peak_workspace_bytes)) + (c.fits_budget ? "" : "!"), c.route);
  }

  os += "\nsteps\n";
  constexpr const char* kStep = "  {:<4}{:<16}{:<11}{:<18}{:<18}{:<12}{:<12}{}\n";
  os += fmt::format(kStep, "#", "kind", "mesh dims", "from", "to", "est. us", "moved", "stages");
  for (size_t i = 0; i < plan.steps().size(); ++i) {
    const Step& s = plan.steps()[i];
    const int k = stages.per_step[i];
    os += fmt::format(
        kStep, i, to_string(s.kind), dims_text(s.mesh_dims), to_string(s.from), to_string(s.to),
        fmt::format("{:.1f}", s.estimated_us), human_bytes(static_cast<double>(s.bytes_moved)),
        k > 1 ? fmt::format("{} x {} chunks", k, human_bytes(static_cast<double>(plan.pipeline_chunk_bytes())))
              : std::string("1"));
    if (s.kind != StepKind::kP2P) continue;
    size_t local = 0, relayed = 0;
    for (const Transfer& t : s.transfers) {
      local += t.is_local();
      relayed += t.is_relayed();
    }
    os += fmt::format("        {} transfers ({} local copies{})\n", s.transfers.size(), local,
                      s.relayed ? fmt::format(", {} relayed", relayed) : std::string());
    for (size_t j = 0; j < s.transfers.size() && j < kMaxListedTransfers; ++j) {
      const Transfer& t = s.transfers[j];
      os += fmt::format("        {:>5} -> {:<5}{:<34}{}{}\n", t.src, t.dst, to_string(t.region),
                        human_bytes(static_cast<double>(t.bytes)),
                        t.is_local()
                            ? std::string("  (local copy)")
                            : fmt::format("{}{}", t.is_relayed() ? fmt::format("  (via {})", t.via) : "",
                                          s.mixed && one_sided_in_mixed(plan.topology(), t) ? "  (nvlink)" : ""));
    }
    if (s.transfers.size() > kMaxListedTransfers)
      os += fmt::format("        ... {} more\n", s.transfers.size() - kMaxListedTransfers);
  }

  os += "\nper-rank traffic (bytes out / in over all steps)\n";
  const detail::RankTotals t = detail::rank_traffic(plan);
  for (int r = 0; r < n && r < kMaxListedRanks; ++r)
    os += fmt::format("  rank {:<5} out {:<12} in {}\n", r, human_bytes(t.out[r]), human_bytes(t.in[r]));
  if (n > kMaxListedRanks) {
    auto mx = std::max_element(t.out.begin(), t.out.end());
    auto mi = std::max_element(t.in.begin(), t.in.end());
    os += fmt::format("  ... {} more ranks; busiest sender rank {} ({}), busiest receiver rank {} ({})\n",
                      n - kMaxListedRanks, mx - t.out.begin(), human_bytes(*mx), mi - t.in.begin(), human_bytes(*mi));
  }
  if (plan.scope_rank())
    os += "  (a rank's plan holds only its own p2p transfers: other ranks' p2p traffic is not shown)\n";
  return os;
}

}  // namespace reshard
