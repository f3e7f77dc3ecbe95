// SVG picture of a plan: one panel per step, a rank x rank matrix coloured by the bytes each rank sends each
// other rank (log scale), local copies outlined. Large meshes are drawn in blocks of ranks.
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

#include "reshard/plan_format.hpp"

namespace reshard {
namespace {

constexpr double kPanel = 360;  // matrix side in pixels
constexpr int kMaxCells = 64;   // per side; larger meshes are aggregated into blocks
constexpr double kMargin = 70;

std::string colour(double t) {  // t in [0, 1]: white -> deep blue
  auto mix = [&](double a, double b) { return static_cast<int>(std::lround(a + (b - a) * t)); };
  std::ostringstream os;
  os << "rgb(" << mix(247, 8) << "," << mix(251, 48) << "," << mix(255, 107) << ")";
  return os.str();
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else
      out += c;
  }
  return out;
}

}  // namespace

std::string plan_svg(const Plan& plan) {
  const int n = plan.src().mesh().size();
  const int block = (n + kMaxCells - 1) / kMaxCells;  // ranks per cell
  const int cells = (n + block - 1) / block;
  const double cell = kPanel / cells;
  const size_t steps = plan.steps().size();
  const double width = kMargin + steps * (kPanel + kMargin);
  const double height = kPanel + 2 * kMargin + 40;

  std::vector<std::vector<double>> matrices;
  double peak = 0;
  for (size_t i = 0; i < steps; ++i) {
    std::vector<double> m = step_traffic(plan, i);
    std::vector<double> agg(static_cast<size_t>(cells) * cells, 0.0);
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b)
        agg[static_cast<size_t>(a / block) * cells + b / block] += m[static_cast<size_t>(a) * n + b];
    for (double x : agg) peak = std::max(peak, x);
    matrices.push_back(std::move(agg));
  }
  const double log_peak = std::log10(std::max(peak, 1.0));

  std::ostringstream os;
  os << std::fixed << std::setprecision(2);
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
     << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  os << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  os << "<text x=\"" << kMargin << "\" y=\"22\" font-size=\"15\">" << escape(plan.src().mesh().str()) << " ["
     << escape(to_string(plan.src().placements())) << "] -&gt; [" << escape(to_string(plan.dst().placements())) << "], "
     << escape(to_string(plan.src().global_shape())) << " " << to_string(plan.dtype()) << ": "
     << to_string(plan.strategy()) << ", " << std::setprecision(1) << plan.estimated_us() << " us estimated, "
     << escape(human_bytes(plan.bytes_moved())) << " moved</text>\n"
     << std::setprecision(2);
  for (size_t i = 0; i < steps; ++i) {
    const Step& s = plan.steps()[i];
    const double x0 = kMargin + i * (kPanel + kMargin), y0 = kMargin;
    os << "<text x=\"" << x0 << "\" y=\"" << y0 - 10 << "\">step " << i << ": " << to_string(s.kind);
    if (!s.mesh_dims.empty()) {
      os << " on mesh dims";
      for (int d : s.mesh_dims) os << " " << d;
    }
    os << " (" << escape(to_string(s.from)) << " -&gt; " << escape(to_string(s.to)) << ")</text>\n";
    os << "<rect x=\"" << x0 << "\" y=\"" << y0 << "\" width=\"" << kPanel << "\" height=\"" << kPanel
       << "\" fill=\"none\" stroke=\"#999\"/>\n";
    const std::vector<double>& m = matrices[i];
    for (int a = 0; a < cells; ++a) {
      for (int b = 0; b < cells; ++b) {
        double v = m[static_cast<size_t>(a) * cells + b];
        if (v <= 0) continue;
        double t = log_peak > 0 ? std::log10(std::max(v, 1.0)) / log_peak : 1.0;
        bool local = a == b && (s.kind == StepKind::kP2P || s.kind == StepKind::kLocal);
        os << "<rect x=\"" << x0 + b * cell << "\" y=\"" << y0 + a * cell << "\" width=\"" << cell << "\" height=\""
           << cell << "\" fill=\"" << colour(std::clamp(t, 0.05, 1.0)) << "\""
           << (local ? " stroke=\"#1a9850\" stroke-width=\"2\"" : "") << "><title>ranks " << a * block;
        if (block > 1) os << "-" << std::min(n, (a + 1) * block) - 1;
        os << " -&gt; " << b * block;
        if (block > 1) os << "-" << std::min(n, (b + 1) * block) - 1;
        os << ": " << escape(human_bytes(v)) << (local ? " (local copy)" : "") << "</title></rect>\n";
      }
    }
    os << "<text x=\"" << x0 + kPanel / 2 << "\" y=\"" << y0 + kPanel + 18
       << "\" text-anchor=\"middle\">destination rank"
       << (block > 1 ? " (blocks of " + std::to_string(block) + ")" : "") << "</text>\n";
    os << "<text x=\"" << x0 - 8 << "\" y=\"" << y0 + kPanel / 2 << "\" text-anchor=\"middle\" transform=\"rotate(-90 "
       << x0 - 8 << " " << y0 + kPanel / 2 << ")\">source rank</text>\n";
    if (cells <= 16) {
      for (int c = 0; c < cells; ++c) {
        os << "<text x=\"" << x0 + (c + 0.5) * cell << "\" y=\"" << y0 - 1
           << "\" font-size=\"9\" text-anchor=\"middle\">" << c * block << "</text>\n";
        os << "<text x=\"" << x0 - 3 << "\" y=\"" << y0 + (c + 0.6) * cell << "\" font-size=\"9\" text-anchor=\"end\">"
           << c * block << "</text>\n";
      }
    }
  }
  const double ly = kMargin + kPanel + 38;
  os << "<text x=\"" << kMargin << "\" y=\"" << ly
     << "\">colour: bytes sent (log scale, darkest = " << escape(human_bytes(peak))
     << "); green outline: local copy; collectives show each member's data reaching each "
     << "other member</text>\n";
  os << "</svg>\n";
  return os.str();
}

}  // namespace reshard
