#include "reshard/profile.hpp"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "plan/json_input.hpp"
#include "reshard/detail/json_text.hpp"
#include "reshard/error.hpp"
#include "reshard/text.hpp"

namespace reshard {
namespace {

using json = nlohmann::ordered_json;

constexpr const char* kSchema = "reshard.profile/1";
constexpr const char* kOps[] = {"p2p", "all_gather", "reduce_scatter", "all_reduce", "all_to_all"};

AlphaBeta* op_field(LinkProfile& l, int i) {
  AlphaBeta* fields[] = {&l.p2p, &l.all_gather, &l.reduce_scatter, &l.all_reduce, &l.all_to_all};
  return fields[i];
}

const json& member(const json& obj, const std::string& key, const std::string& path) {
  if (!obj.is_object()) fail(ErrorKind::kInvalidArgument, cat("profile field '", path, "' must be an object"));
  auto it = obj.find(key);
  if (it == obj.end())
    fail(ErrorKind::kInvalidArgument, cat("profile is missing field '", path.empty() ? key : path + "." + key, "'"));
  return *it;
}

// Ranges that keep every estimate finite: the largest time the cost model can form (2^63 bytes at the lowest
// bandwidth, summed over steps and pipeline stages) stays far below double's range.
constexpr double kMaxLatencyUs = 1e9;       // about 17 minutes
constexpr double kMinBandwidthGBps = 1e-3;  // 1 MB/s
constexpr double kMaxBandwidthGBps = 1e9;
constexpr double kMaxSampleBytes = 9.3e18;  // 2^63
constexpr double kMaxSampleUs = 1e12;

enum class Kind { kLatency, kBandwidth, kBytes, kFactor };
constexpr double kMaxProfileBytes = 1e15;
constexpr double kMaxFactor = 100;

double number(const json& obj, const std::string& key, const std::string& path, Kind kind) {
  std::string full = path.empty() ? key : path + "." + key;
  const json& v = member(obj, key, path);
  if (!v.is_number())
    fail(ErrorKind::kInvalidArgument, cat("profile field '", full, "' must be a number, got ", printable(v.dump())));
  double x = v.get<double>();
  if (kind == Kind::kBandwidth && !(x >= kMinBandwidthGBps && x <= kMaxBandwidthGBps))
    fail(ErrorKind::kInvalidArgument, cat("profile field '", full, "' must be > 0: a bandwidth in [", kMinBandwidthGBps,
                                          ", ", kMaxBandwidthGBps, "] GB/s, got ", v.dump()));
  if (kind == Kind::kLatency && !(x >= 0 && x <= kMaxLatencyUs))
    fail(ErrorKind::kInvalidArgument,
         cat("profile field '", full, "' must be >= 0: a time in [0, ", kMaxLatencyUs, "] us, got ", v.dump()));
  if (kind == Kind::kFactor && !(x >= 1 && x <= kMaxFactor))
    fail(ErrorKind::kInvalidArgument,
         cat("profile field '", full, "' must be a factor in [1, ", kMaxFactor, "], got ", v.dump()));
  if (kind == Kind::kBytes && !(x >= 0 && x <= kMaxProfileBytes && x == std::floor(x)))
    fail(ErrorKind::kInvalidArgument, cat("profile field '", full, "' must be a whole number of bytes in [0, ",
                                          kMaxProfileBytes, "], got ", v.dump()));
  return x;
}

AlphaBeta alpha_beta(const json& obj, const std::string& key, const std::string& path) {
  std::string full = path.empty() ? key : path + "." + key;
  const json& v = member(obj, key, path);
  AlphaBeta ab{number(v, "alpha_us", full, Kind::kLatency), number(v, "bandwidth_GBps", full, Kind::kBandwidth), {}};
  if (v.contains("samples")) {
    const json& pts = v["samples"];
    if (!pts.is_array())
      fail(ErrorKind::kInvalidArgument,
           cat("profile field '", full, ".samples' must be an array of [bytes, us] pairs"));
    for (size_t i = 0; i < pts.size(); ++i) {
      const json& p = pts[i];
      auto in = [](const json& x, double hi) { return x.is_number() && x.get<double>() > 0 && x.get<double>() <= hi; };
      if (!p.is_array() || p.size() != 2 || !in(p[0], kMaxSampleBytes) || !in(p[1], kMaxSampleUs))
        fail(ErrorKind::kInvalidArgument,
             cat("profile field '", full, ".samples[", i, "]' must be [bytes in (0, 2^63], us in (0, 1e12]], got ",
                 printable(p.dump(), 120)));
      if (!ab.samples.empty() && !(p[0].get<double>() > ab.samples.back().first))
        fail(ErrorKind::kInvalidArgument, cat("profile field '", full, ".samples' must increase in bytes"));
      ab.samples.emplace_back(p[0].get<double>(), p[1].get<double>());
    }
  }
  return ab;
}

json to_json(const AlphaBeta& ab) {
  json j{{"alpha_us", ab.alpha_us}, {"bandwidth_GBps", ab.bandwidth_GBps}};
  if (!ab.samples.empty()) {
    json pts = json::array();
    for (auto [x, t] : ab.samples) pts.push_back(json::array({x, t}));
    j["samples"] = pts;
  }
  return j;
}

}  // namespace

double AlphaBeta::time_us(double bytes) const {
  if (samples.size() < 2) return alpha_us + bytes / (bandwidth_GBps * 1e3);
  if (bytes <= samples.front().first) return samples.front().second;
  if (bytes >= samples.back().first)
    return samples.back().second + (bytes - samples.back().first) / (bandwidth_GBps * 1e3);
  auto hi = std::upper_bound(samples.begin(), samples.end(), bytes,
                             [](double x, const std::pair<double, double>& p) { return x < p.first; });
  auto lo = hi - 1;
  double f = std::log(bytes / lo->first) / std::log(hi->first / lo->first);
  return lo->second * std::pow(hi->second / lo->second, f);
}

namespace detail {
extern const char
    kBuiltinProfileJson[];  // planner/data/builtin_profile.json, as text (src/plan/builtin_profile.cpp.in)
}  // namespace detail

Profile default_profile() {
  static const Profile builtin = profile_from_json(detail::kBuiltinProfileJson);
  return builtin;
}

Profile profile_from_json(const std::string& text) {
  const json j = detail::parse_json_input(text, "profile");  // nesting limited before the unknown members are copied
  if (!j.is_object()) fail(ErrorKind::kInvalidArgument, "profile must be a JSON object");
  Profile p;
  if (j.contains("schema") && j["schema"] != kSchema)
    fail(ErrorKind::kInvalidArgument,
         cat("profile field 'schema' must be \"", kSchema, "\", got ", printable(j["schema"].dump())));
  const json& name = member(j, "name", "");
  if (!name.is_string())
    fail(ErrorKind::kInvalidArgument, cat("profile field 'name' must be a string, got ", printable(name.dump(), 60)));
  p.name = name.get<std::string>();
  if (j.contains("source")) {
    if (!j["source"].is_string()) fail(ErrorKind::kInvalidArgument, "profile field 'source' must be a string");
    p.source = j["source"].get<std::string>();
  }
  for (auto [key, link] : {std::pair{"intra_node", &p.intra_node}, std::pair{"inter_node", &p.inter_node}}) {
    const json& l = member(j, key, "");
    for (int i = 0; i < 5; ++i) *op_field(*link, i) = alpha_beta(l, kOps[i], key);
  }
  p.p2p_per_peer_us = number(j, "p2p_per_peer_us", "", Kind::kLatency);
  p.step_overhead_us = number(j, "step_overhead_us", "", Kind::kLatency);
  p.copy = alpha_beta(j, "copy", "");
  // Fields a profile may leave out take the built-in profile's values (it has every field, so parsing it asks for
  // none).
  std::optional<Profile> builtin;
  auto defaults = [&]() -> const Profile& {
    if (!builtin) builtin = default_profile();
    return *builtin;
  };
  p.copy_engine = j.contains("copy_engine") ? alpha_beta(j, "copy_engine", "") : defaults().copy_engine;
  if (!j.contains("nvlink") || !j["nvlink"].contains("fused") || !j["nvlink"].contains("map_us"))
    p.nvlink = defaults().nvlink;
  if (j.contains("nvlink")) {
    const json& n = j["nvlink"];
    p.nvlink.copy_engine = alpha_beta(n, "copy_engine", "nvlink");
    p.nvlink.kernel = alpha_beta(n, "kernel", "nvlink");
    p.nvlink.sync_us = number(n, "sync_us", "nvlink", Kind::kLatency);
    p.nvlink.step_overhead_us = number(n, "step_overhead_us", "nvlink", Kind::kLatency);
    p.nvlink.copy_engine_min_row_bytes =
        static_cast<long long>(number(n, "copy_engine_min_row_bytes", "nvlink", Kind::kBytes));
    if (n.contains("fused")) {
      p.nvlink.fused = alpha_beta(n, "fused", "nvlink");
      p.nvlink.fused_overhead_us = number(n, "fused_overhead_us", "nvlink", Kind::kLatency);
    }
    if (n.contains("map_us")) p.nvlink.map_us = number(n, "map_us", "nvlink", Kind::kLatency);
    p.nvlink.first_map_us = n.contains("first_map_us") ? number(n, "first_map_us", "nvlink", Kind::kLatency)
                                                       : defaults().nvlink.first_map_us;
  }
  p.low_sm_kernel_factor = j.contains("low_sm_kernel_factor") ? number(j, "low_sm_kernel_factor", "", Kind::kFactor)
                                                              : defaults().low_sm_kernel_factor;
  json extra = json::object();
  for (auto it = j.begin(); it != j.end(); ++it) {
    static const std::string known[] = {
        "schema",           "name", "source",      "intra_node", "inter_node",          "p2p_per_peer_us",
        "step_overhead_us", "copy", "copy_engine", "nvlink",     "low_sm_kernel_factor"};
    if (std::find(std::begin(known), std::end(known), it.key()) == std::end(known)) extra[it.key()] = it.value();
  }
  if (!extra.empty()) p.extra_json = extra.dump();
  return p;
}

Profile load_profile(const std::string& path) {
  std::string text = read_text_file(path, "profile", kMaxProfileFileBytes);
  try {
    return profile_from_json(text);
  } catch (const Error& e) {
    fail(e.kind(), cat(printable(path), ": ", e.what()));
  }
}

std::string profile_to_json(const Profile& p) {
  json j;
  j["schema"] = kSchema;
  j["name"] = p.name;
  j["source"] = p.source;
  for (auto [key, link] : {std::pair{"intra_node", &p.intra_node}, std::pair{"inter_node", &p.inter_node}}) {
    json l;
    LinkProfile copy = *link;
    for (int i = 0; i < 5; ++i) l[kOps[i]] = to_json(*op_field(copy, i));
    j[key] = l;
  }
  j["p2p_per_peer_us"] = p.p2p_per_peer_us;
  j["step_overhead_us"] = p.step_overhead_us;
  j["copy"] = to_json(p.copy);
  j["copy_engine"] = to_json(p.copy_engine);
  j["nvlink"] = json{{"copy_engine", to_json(p.nvlink.copy_engine)},
                     {"kernel", to_json(p.nvlink.kernel)},
                     {"sync_us", p.nvlink.sync_us},
                     {"step_overhead_us", p.nvlink.step_overhead_us},
                     {"copy_engine_min_row_bytes", p.nvlink.copy_engine_min_row_bytes},
                     {"fused", to_json(p.nvlink.fused)},
                     {"fused_overhead_us", p.nvlink.fused_overhead_us},
                     {"map_us", p.nvlink.map_us},
                     {"first_map_us", p.nvlink.first_map_us}};
  j["low_sm_kernel_factor"] = p.low_sm_kernel_factor;
  if (!p.extra_json.empty()) {
    json extra = json::parse(p.extra_json);
    for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
  }
  return detail::json_text(j) + "\n";
}

}  // namespace reshard
