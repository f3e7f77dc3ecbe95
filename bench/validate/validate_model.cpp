// Validates a cost-model profile against a measured sweep (bench/results/.../sweep.csv): every measured run is
// priced again with the profile (the planner is a pure function of the case), and per case we report predicted vs
// measured time and whether auto, under this profile, picks the measured-fastest strategy (or one within 5%).
//
//   validate_model sweep.csv profile.json [out.csv]
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "reshard/planner.hpp"

namespace {

std::vector<std::string> parse_csv_line(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (char c : line) {
    if (c == '"')
      quoted = !quoted;
    else if (c == ',' && !quoted) {
      out.push_back(cur);
      cur.clear();
    } else
      cur += c;
  }
  out.push_back(cur);
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  using namespace reshard;
  if (argc < 3) {
    std::cerr << "usage: validate_model sweep.csv profile.json [out.csv]\n";
    return 2;
  }
  try {
    std::ifstream in(argv[1]);
    RESHARD_REQUIRE(in.good(), "cannot read ", argv[1]);
    PlanOptions base;
    base.profile = load_profile(argv[2]);
    std::string line;
    std::getline(in, line);
    std::vector<std::string> header = parse_csv_line(line);
    auto col = [&](const std::string& name) {
      auto it = std::find(header.begin(), header.end(), name);
      RESHARD_REQUIRE(it != header.end(), "sweep CSV has no column '", name, "'");
      return static_cast<size_t>(it - header.begin());
    };
    const size_t c_mesh = col("mesh"), c_from = col("from"), c_to = col("to"), c_shape = col("shape"),
                 c_dtype = col("dtype"), c_strategy = col("strategy"), c_time = col("median_us");
    struct Run {
      Strategy strategy;
      double measured, predicted;
    };
    std::map<std::string, std::vector<Run>> cases;
    std::map<std::string, Strategy> auto_choice;
    std::ofstream out(argc > 3 ? argv[3] : "/dev/null");
    out << "mesh,from,to,shape,dtype,strategy,measured_us,predicted_us,rel_error\n";
    std::vector<double> errors;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      std::vector<std::string> f = parse_csv_line(line);
      Mesh mesh(parse_mesh_shape(f[c_mesh]));
      Dims shape = parse_shape(f[c_shape]);
      Layout src(mesh, parse_placements(f[c_from]), shape), dst(mesh, parse_placements(f[c_to]), shape);
      DType dtype = parse_dtype(f[c_dtype]);
      PlanOptions o = base;
      o.strategy = parse_strategy(f[c_strategy]);
      double predicted = make_plan(src, dst, dtype, o).estimated_us();
      double measured = std::stod(f[c_time]);
      std::string key = f[c_mesh] + " " + f[c_from] + ">" + f[c_to] + " " + f[c_shape] + " " + f[c_dtype];
      cases[key].push_back(Run{o.strategy, measured, predicted});
      if (!auto_choice.count(key)) {
        o.strategy = Strategy::kAuto;
        auto_choice[key] = make_plan(src, dst, dtype, o).strategy();
      }
      double e = (predicted - measured) / measured;
      errors.push_back(std::abs(e));
      out << f[c_mesh] << ",\"" << f[c_from] << "\",\"" << f[c_to] << "\"," << f[c_shape] << "," << f[c_dtype] << ","
          << f[c_strategy] << "," << measured << "," << predicted << "," << e << "\n";
    }
    int good = 0, total = 0;
    for (const auto& [key, runs] : cases) {
      double fastest = 1e300, chosen = 0;
      for (const Run& r : runs) fastest = std::min(fastest, r.measured);
      for (const Run& r : runs)
        if (r.strategy == auto_choice[key]) chosen = r.measured;
      ++total;
      good += chosen <= 1.05 * fastest;
    }
    std::vector<double> sorted = errors;
    std::sort(sorted.begin(), sorted.end());
    std::cout << "profile " << base.profile.name << "\n"
              << "runs " << errors.size() << ", median |predicted - measured| / measured " << 100 * median(errors)
              << "%, p90 " << 100 * sorted[sorted.size() * 9 / 10] << "%\n"
              << "cases " << total << ", auto within 5% of the measured fastest: " << good << " ("
              << 100.0 * good / total << "%)\n";
    return 0;
  } catch (const Error& e) {
    std::cerr << "validate_model: " << e.what() << "\n";
    return 2;
  }
}
