#include <algorithm>
#include <iomanip>
#include <sstream>

#include "reshard/plan_format.hpp"
#include "transitions.hpp"

namespace reshard {
namespace {

constexpr int kMaxListedTransfers = 24;
constexpr int kMaxListedRanks = 32;

std::string fixed(double x, int digits = 1) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << x;
  return os.str();
}

std::string dims_text(const std::vector<int>& dims) { return dims.empty() ? "-" : join(dims); }

std::string why(const Plan& plan) {
  const Candidate* chosen = nullptr;
  for (const Candidate& c : plan.candidates())
    if (c.available && c.strategy == plan.strategy()) chosen = &c;
  if (!chosen) return "";
  std::ostringstream os;
  os << "why: " << to_string(plan.strategy()) << " at " << fixed(chosen->estimated_us) << " us";
  for (const Candidate& c : plan.candidates()) {
    if (&c == chosen) continue;
    if (!c.available) {
      os << "; " << to_string(c.strategy) << " unavailable (" << c.reason << ")";
    } else if (!c.fits_budget) {
      os << "; " << to_string(c.strategy) << " needs " << human_bytes(c.peak_workspace_bytes)
         << " of workspace, over the budget";
    } else if (c.estimated_us >= chosen->estimated_us) {
      os << "; " << fixed(c.estimated_us / std::max(chosen->estimated_us, 1e-9), 2) << "x faster than "
         << to_string(c.strategy) << " (" << fixed(c.estimated_us) << " us)";
    } else {
      os << "; " << to_string(c.strategy) << " would be faster (" << fixed(c.estimated_us)
         << " us) but was not requested";
    }
  }
  return os.str();
}

}  // namespace

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  return u == 0 ? fixed(bytes, 0) + " B" : fixed(bytes, 1) + " " + units[u];
}

std::string plan_table(const Plan& plan) {
  std::ostringstream os;
  const Mesh& mesh = plan.src().mesh();
  const int n = mesh.size();
  Index tensor_bytes = plan.src().global_volume() * plan.element_size();
  os << "plan   " << mesh.str() << " [" << to_string(plan.src().placements()) << "] -> ["
     << to_string(plan.dst().placements()) << "], " << to_string(plan.src().global_shape()) << " "
     << to_string(plan.dtype()) << " (" << human_bytes(tensor_bytes) << "), " << plan.topology().ranks_per_node
     << " ranks per node, profile " << plan.profile_name() << "\n";
  if (plan.scope_rank()) os << "scope  transfers of rank " << *plan.scope_rank() << " only\n";
  os << "chose  " << to_string(plan.strategy()) << ": " << fixed(plan.estimated_us()) << " us estimated, "
     << human_bytes(plan.bytes_moved()) << " moved between ranks, peak workspace "
     << human_bytes(plan.peak_workspace_bytes()) << " per rank";
  if (plan.memory_budget_bytes()) os << " (budget " << human_bytes(*plan.memory_budget_bytes()) << ")";
  os << "\n" << why(plan) << "\n\ncandidates\n";
  os << std::left << "  " << std::setw(12) << "strategy" << std::setw(12) << "est. us" << std::setw(7) << "steps"
     << std::setw(13) << "moved" << std::setw(13) << "workspace"
     << "route\n";
  for (const Candidate& c : plan.candidates()) {
    os << (c.strategy == plan.strategy() && c.available ? "* " : "  ") << std::setw(12) << to_string(c.strategy);
    if (!c.available) {
      os << "unavailable: " << c.reason << "\n";
      continue;
    }
    os << std::setw(12) << fixed(c.estimated_us) << std::setw(7) << c.steps << std::setw(13)
       << human_bytes(c.bytes_moved) << std::setw(13)
       << (human_bytes(c.peak_workspace_bytes) + (c.fits_budget ? "" : "!")) << c.route << "\n";
  }

  os << "\nsteps\n";
  os << "  " << std::setw(4) << "#" << std::setw(16) << "kind" << std::setw(11) << "mesh dims" << std::setw(18)
     << "from" << std::setw(18) << "to" << std::setw(12) << "est. us"
     << "moved\n";
  for (size_t i = 0; i < plan.steps().size(); ++i) {
    const Step& s = plan.steps()[i];
    os << "  " << std::setw(4) << i << std::setw(16) << to_string(s.kind) << std::setw(11) << dims_text(s.mesh_dims)
       << std::setw(18) << to_string(s.from) << std::setw(18) << to_string(s.to) << std::setw(12)
       << fixed(s.estimated_us) << human_bytes(s.bytes_moved) << "\n";
    if (s.kind != StepKind::kP2P) continue;
    int local = 0;
    for (const Transfer& t : s.transfers) local += t.is_local();
    os << "        " << s.transfers.size() << " transfers (" << local << " local copies)\n";
    int listed = 0;
    for (const Transfer& t : s.transfers) {
      if (listed++ == kMaxListedTransfers) {
        os << "        ... " << s.transfers.size() - kMaxListedTransfers << " more\n";
        break;
      }
      os << "        " << std::right << std::setw(5) << t.src << " -> " << std::left << std::setw(5) << t.dst
         << std::setw(34) << to_string(t.region) << human_bytes(t.bytes) << (t.is_local() ? "  (local copy)" : "")
         << "\n";
    }
  }

  os << "\nper-rank traffic (bytes out / in over all steps)\n";
  std::vector<double> out(n, 0), in(n, 0);
  for (size_t i = 0; i < plan.steps().size(); ++i) {
    std::vector<double> m = step_traffic(plan, i);
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b)
        if (a != b) {
          out[a] += m[static_cast<size_t>(a) * n + b];
          in[b] += m[static_cast<size_t>(a) * n + b];
        }
  }
  for (int r = 0; r < n && r < kMaxListedRanks; ++r)
    os << "  rank " << std::setw(5) << r << " out " << std::setw(12) << human_bytes(out[r]) << " in "
       << human_bytes(in[r]) << "\n";
  if (n > kMaxListedRanks) {
    auto mx = std::max_element(out.begin(), out.end());
    auto mi = std::max_element(in.begin(), in.end());
    os << "  ... " << n - kMaxListedRanks << " more ranks; busiest sender rank " << (mx - out.begin()) << " ("
       << human_bytes(*mx) << "), busiest receiver rank " << (mi - in.begin()) << " (" << human_bytes(*mi) << ")\n";
  }
  return os.str();
}

std::vector<double> step_traffic(const Plan& plan, size_t i) {
  const Step& s = plan.steps()[i];
  const Mesh& mesh = plan.src().mesh();
  const int n = mesh.size();
  const int es = plan.element_size();
  std::vector<double> m(static_cast<size_t>(n) * n, 0.0);
  auto at = [&](int a, int b) -> double& { return m[static_cast<size_t>(a) * n + b]; };
  Layout a = plan.layout_before(i), b = plan.layout_before(i + 1);
  switch (s.kind) {
    case StepKind::kP2P:
      for (const Transfer& t : s.transfers) at(t.src, t.dst) += static_cast<double>(t.bytes);
      break;
    case StepKind::kLocal:
      for (int r = 0; r < n; ++r) at(r, r) += static_cast<double>(b.local_volume(r) * es);
      break;
    case StepKind::kAllGather:
    case StepKind::kAllToAll:
    case StepKind::kReduceScatter:
    case StepKind::kAllReduce:
      for (int r = 0; r < n; ++r) {
        std::vector<int> group = mesh.group(r, s.mesh_dims);
        int g = static_cast<int>(group.size());
        for (int peer : group) {
          double bytes = 0;
          if (s.kind == StepKind::kAllGather) bytes = static_cast<double>(a.local_volume(r) * es);
          if (s.kind == StepKind::kAllToAll) bytes = static_cast<double>(volume(intersect(a.box(r), b.box(peer))) * es);
          if (s.kind == StepKind::kReduceScatter) bytes = static_cast<double>(b.local_volume(peer) * es);
          if (s.kind == StepKind::kAllReduce) bytes = 2.0 * a.local_volume(r) * es / std::max(g, 1);
          at(r, peer) += bytes;
        }
      }
      break;
  }
  return m;
}

}  // namespace reshard
