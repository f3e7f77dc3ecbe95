// SVG picture of a plan: one panel per step, a rank x rank matrix coloured by the bytes each rank sends each other
// rank (log scale, with its colour scale drawn), local copies outlined. Meshes over kMaxCells ranks are drawn in
// blocks of ranks, with each rank's number of peers beside the matrix (so that a transpose, one peer per rank, does
// not look like a dense all-to-all). The canvas is sized to its text.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "report/plan_traffic.hpp"
#include "reshard/plan_format.hpp"

namespace reshard {
namespace {

constexpr double kPanel = 360;  // matrix side in pixels
constexpr int kMaxCells = 64;   // per side; larger meshes are aggregated into blocks
constexpr double kLeft = 80;    // left of the first matrix: axis label and tick labels
constexpr double kStrip = 36;   // the peers strip right of a blocked matrix
constexpr double kGap = 96;     // between panels (room for the next panel's tick labels and axis label)
constexpr double kTop = 100;    // top of the matrices: title, step captions, tick labels

// Approximate text width (sans-serif averages ~0.6 em per character).
double text_width(const std::string& s, double font_size) { return 0.6 * font_size * static_cast<double>(s.size()); }

std::string colour(double t) {  // t in [0, 1]: pale -> deep blue
  auto mix = [&](double a, double b) { return static_cast<int>(std::lround(a + (b - a) * t)); };
  return fmt::format("rgb({},{},{})", mix(222, 8), mix(235, 48), mix(247, 107));
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
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

std::string text(double x, double y, const std::string& body, const std::string& attrs = "") {
  return fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\"{}{}>{}</text>\n", x, y, attrs.empty() ? "" : " ", attrs,
                     escape(body));
}

std::string range_label(int first, int last) {
  return first == last ? fmt::format("{}", first) : fmt::format("{}-{}", first, last);
}

// Log colour scale between the smallest non-zero entry and the largest.
struct Scale {
  double lo = 1, hi = 1;
  double t(double v) const {
    if (hi <= lo) return 1.0;
    return std::clamp((std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)), 0.0, 1.0);
  }
};

}  // namespace

std::string plan_svg(const Plan& plan) {
  const int n = plan.src().mesh().world_size();
  const int block = (n + kMaxCells - 1) / kMaxCells;  // ranks per cell
  const bool blocked = block > 1;
  const size_t steps = plan.steps().size();

  std::vector<detail::BlockTraffic> traffic;
  Scale scale{0, 0};
  for (size_t i = 0; i < steps; ++i) {
    traffic.push_back(detail::block_traffic(plan, i, block));
    for (double x : traffic.back().bytes) {
      if (x <= 0) continue;
      scale.lo = scale.lo > 0 ? std::min(scale.lo, x) : x;
      scale.hi = std::max(scale.hi, x);
    }
  }
  const int cells = traffic.empty() ? std::max(1, (n + block - 1) / block) : traffic.front().cells;
  const double cell = kPanel / cells;

  // Captions first: the panels are as wide as their text needs.
  const std::string title =
      fmt::format("{} [{}] -> [{}], {} {}: {}, {:.1f} us estimated, {} moved", plan.src().mesh().str(),
                  to_string(plan.src().placements()), to_string(plan.dst().placements()),
                  to_string(plan.src().global_shape()), to_string(plan.dtype()), to_string(plan.strategy()),
                  plan.estimated_us(), human_bytes(static_cast<double>(plan.bytes_moved())));
  std::vector<std::string> head(steps), sub(steps), peers(steps);
  std::vector<double> slot(steps);
  for (size_t i = 0; i < steps; ++i) {
    const Step& s = plan.steps()[i];
    head[i] =
        fmt::format("step {}: {}{}{}{}{}", i, to_string(s.kind), s.hierarchical ? " (hierarchical)" : "",
                    s.mixed ? " (mixed transports)" : "", s.relayed ? " (relayed)" : "",
                    s.mesh_dims.empty() ? std::string() : fmt::format(" on mesh dims {}", join(s.mesh_dims, ' ')));
    sub[i] = fmt::format("{} -> {}", to_string(s.from), to_string(s.to));
    const std::vector<int>& p = traffic[i].peers_out;
    if (!p.empty() && s.kind != StepKind::kLocal) {
      auto [mn, mx] = std::minmax_element(p.begin(), p.end());
      const auto idle = std::count(p.begin(), p.end(), 0);
      if (*mn == *mx)
        peers[i] = fmt::format("each rank sends to {} other rank{}", *mn, *mn == 1 ? "" : "s");
      else if (*mn == 0)
        peers[i] =
            fmt::format("each rank sends to at most {} other rank{} ({} send to none)", *mx, *mx == 1 ? "" : "s", idle);
      else
        peers[i] = fmt::format("each rank sends to {} to {} other ranks", *mn, *mx);
    }
    const double matrix = kPanel + (blocked ? kStrip : 0);
    slot[i] = std::max({matrix, text_width(head[i], 12), text_width(sub[i], 12), text_width(peers[i], 11)});
  }
  const std::string axis = blocked ? fmt::format("destination rank (blocks of {})", block) : "destination rank";
  const bool any_mixed = std::any_of(plan.steps().begin(), plan.steps().end(), [](const Step& s) { return s.mixed; });
  const std::string legend =
      std::string("green outline: local copy; ") +
      (any_mixed ? "blue dashed outline: one-sided (nvlink) within a node of a step that mixes transports; " : "") +
      "collectives show each member's data reaching each other member";
  double width = kLeft;
  for (size_t i = 0; i < steps; ++i) width += slot[i] + kGap;
  width = std::max({width, kLeft + text_width(title, 15) + 20, kLeft + text_width(legend, 12) + 20, 520.0});
  const double scale_y = kTop + kPanel + (peers.empty() ? 40 : 56);
  const double height = scale_y + 70;

  std::string os = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" viewBox=\"0 0 {:.0f} {:.0f}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n",
      width, height, width, height);
  os += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  os += text(kLeft, 24, title, "font-size=\"15\"");

  double x0 = kLeft;
  for (size_t i = 0; i < steps; ++i) {
    const Step& s = plan.steps()[i];
    const detail::BlockTraffic& t = traffic[i];
    const double y0 = kTop;
    os += text(x0, y0 - 52, head[i]);
    os += text(x0, y0 - 36, sub[i], "fill=\"#444\"");
    os += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" stroke=\"#999\"/>\n", x0, y0,
        kPanel, kPanel);
    for (int a = 0; a < cells; ++a) {
      for (int b = 0; b < cells; ++b) {
        const size_t k = static_cast<size_t>(a) * cells + b;
        const double v = t.bytes[k];
        if (v <= 0) continue;
        const bool local = t.local[k];
        const int a_last = std::min(n, (a + 1) * block) - 1, b_last = std::min(n, (b + 1) * block) - 1;
        const Topology& topo = plan.topology();  // a mixed step's cell between ranks of one node: one-sided
        const bool one_sided = !local && s.mixed && topo.same_node(a * block, a_last) &&
                               topo.same_node(a * block, b * block) && topo.same_node(b * block, b_last);
        os += fmt::format(
            "<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\"{}><title>ranks {} -&gt; "
            "{}: "
            "{}{}</title></rect>\n",
            x0 + b * cell, y0 + a * cell, cell, cell, colour(scale.t(v)),
            local       ? " stroke=\"#1a9850\" stroke-width=\"2\""
            : one_sided ? " stroke=\"#2166ac\" stroke-width=\"2\" stroke-dasharray=\"3,2\""
                        : "",
            range_label(a * block, a_last), range_label(b * block, b_last), escape(human_bytes(v)),
            local ? " (includes local copies)" : "");
      }
    }
    // Tick labels: above the matrix and left of it, clear of the axis labels.
    if (cells <= 16) {
      for (int c = 0; c < cells; ++c) {
        os +=
            text(x0 + (c + 0.5) * cell, y0 - 6, fmt::format("{}", c * block), "font-size=\"9\" text-anchor=\"middle\"");
        os += text(x0 - 4, y0 + (c + 0.5) * cell + 3, fmt::format("{}", c * block),
                   "font-size=\"9\" text-anchor=\"end\"");
      }
    } else {
      os += text(x0, y0 - 6, "0", "font-size=\"9\" text-anchor=\"middle\"");
      os += text(x0 + kPanel, y0 - 6, fmt::format("{}", n - 1), "font-size=\"9\" text-anchor=\"middle\"");
      os += text(x0 - 4, y0 + 8, "0", "font-size=\"9\" text-anchor=\"end\"");
      os += text(x0 - 4, y0 + kPanel, fmt::format("{}", n - 1), "font-size=\"9\" text-anchor=\"end\"");
    }
    os += text(x0 + kPanel / 2, y0 + kPanel + 18, axis, "text-anchor=\"middle\"");
    const double label_x = x0 - 4 - text_width(fmt::format("{}", n - 1), 9) - 10;
    os += fmt::format(
        "<text x=\"{0:.1f}\" y=\"{1:.1f}\" text-anchor=\"middle\" transform=\"rotate(-90 {0:.1f} {1:.1f})\">source "
        "rank</text>\n",
        label_x, y0 + kPanel / 2);
    if (!peers[i].empty()) os += text(x0, y0 + kPanel + 36, peers[i], "font-size=\"11\" fill=\"#444\"");
    // Blocked view: the most peers any rank of each row block sends to, as a bar scaled to the step's most.
    if (blocked && s.kind != StepKind::kLocal) {
      const double sx = x0 + kPanel + 14, sw = kStrip - 16;
      const int step_most = t.peers_out.empty() ? 0 : *std::max_element(t.peers_out.begin(), t.peers_out.end());
      os += text(sx, y0 - 20, "peers", "font-size=\"9\"");
      os += text(sx, y0 - 6, fmt::format("<={}", step_most), "font-size=\"9\"");
      os += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" stroke=\"#ccc\"/>\n", sx,
          y0, sw, kPanel);
      for (int a = 0; a < cells && step_most > 0; ++a) {
        int most = 0;
        for (int r = a * block; r < std::min(n, (a + 1) * block); ++r) most = std::max(most, t.peers_out[r]);
        if (most == 0) continue;
        os += fmt::format(
            "<rect x=\"{:.1f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"#d95f02\"><title>ranks {}: at "
            "most {} peers each</title></rect>\n",
            sx, y0 + a * cell, sw * most / step_most, cell, range_label(a * block, std::min(n, (a + 1) * block) - 1),
            most);
      }
    }
    x0 += slot[i] + kGap;
  }

  // Colour scale: the log range of the cells' bytes.
  os += text(kLeft, scale_y - 6, "bytes sent (log scale)", "font-size=\"11\"");
  constexpr int kSwatches = 24;
  constexpr double kBar = 240;
  for (int k = 0; k < kSwatches; ++k)
    os += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"12\" fill=\"{}\"/>\n",
                      kLeft + k * kBar / kSwatches, scale_y, kBar / kSwatches + 0.5, colour((k + 0.5) / kSwatches));
  if (scale.hi > scale.lo) {
    os += text(kLeft, scale_y + 26, human_bytes(scale.lo), "font-size=\"10\"");
    os += text(kLeft + kBar / 2, scale_y + 26, human_bytes(std::sqrt(scale.lo * scale.hi)),
               "font-size=\"10\" text-anchor=\"middle\"");
    os += text(kLeft + kBar, scale_y + 26, human_bytes(scale.hi), "font-size=\"10\" text-anchor=\"end\"");
  } else {
    os += text(kLeft, scale_y + 26, scale.hi > 0 ? "every entry " + human_bytes(scale.hi) : "no bytes move",
               "font-size=\"10\"");
  }
  os += text(kLeft, scale_y + 48, legend);
  os += "</svg>\n";
  return os;
}

}  // namespace reshard
