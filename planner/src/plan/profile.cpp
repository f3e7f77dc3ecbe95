#include "reshard/profile.hpp"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

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

// A calibrated line with the times `reshard calibrate` measured at its ten sizes, 4 KiB * 4^k (4 KiB-1 GiB).
AlphaBeta measured(double alpha_us, double bandwidth_GBps, std::initializer_list<double> times_us) {
  AlphaBeta ab{alpha_us, bandwidth_GBps, {}};
  double bytes = 4096;
  for (double t : times_us) {
    ab.samples.emplace_back(bytes, t);
    bytes *= 4;
  }
  return ab;
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

Profile default_profile() {
  Profile p;
  p.name = "h100-h200-nvlink-ib400";
  p.source =
      "intra_node: NCCL measured by `reshard calibrate` on 2x H100 NV18 (2026-11-26, bench/profiles/h100x2.json: "
      "lines and measured points), within 2-5% of 2x H200 (bench/profiles/h200x2.json); step_overhead_us: the "
      "executor's fixed cost per communicating NCCL step per call, 48 us (52 fitted on 2x H100, 44 on 2x H200). "
      "nvlink: "
      "copy-engine bandwidth, sync and step overhead, fused line and overhead fitted from end-to-end runs on 2x H100 "
      "(2026-11-26); kernel pulls 326 GB/s measured on 2x H200. inter_node: 400 Gb/s InfiniBand = 50 GB/s per GPU NIC, "
      "45 GB/s achievable (90%, estimate), latencies estimates. copy (the copy kernel on strided packs) and "
      "copy_engine "
      "(contiguous copies on the copy engines): calibrated on 2x H100 (2026-11-27, absolute-error lines). "
      "Run `reshard calibrate` to replace these with values fitted on your machine.";
  // NCCL within a node: each operation's fitted line (alpha us, GB/s) and its ten measured points, 4 KiB-1 GiB,
  // between which the time is interpolated (the lines alone underprice 1-64 MiB by up to a quarter). Where every
  // figure of this function comes from: docs/planner.md, "Profiles" (Defaults).
  p.intra_node.p2p = measured(10.9, 292.3, {9.4, 10.3, 10.8, 12.6, 18.8, 33.5, 82.5, 252.9, 906.2, 2983.9});
  p.intra_node.all_gather = measured(10.9, 239.9, {9.7, 10.6, 11.0, 11.5, 19.9, 39.6, 96.1, 295.1, 1039.9, 3806.4});
  p.intra_node.reduce_scatter = measured(10.0, 238.5, {8.4, 10.6, 10.0, 11.2, 17.8, 36.4, 97.2, 304.3, 1040.1, 3781.8});
  p.intra_node.all_reduce = measured(10.4, 276.6, {9.0, 10.0, 10.0, 12.3, 16.7, 37.0, 83.5, 263.9, 900.4, 3286.7});
  p.intra_node.all_to_all = measured(11.0, 291.9, {9.3, 10.5, 11.1, 12.5, 20.1, 33.1, 82.6, 260.0, 901.6, 2966.6});
  p.inter_node.p2p = {20.0, 45.0};
  p.inter_node.all_gather = {25.0, 45.0};
  p.inter_node.reduce_scatter = {25.0, 45.0};
  p.inter_node.all_reduce = {30.0, 45.0};
  p.inter_node.all_to_all = {25.0, 42.0};
  p.p2p_per_peer_us = 1.5;
  p.step_overhead_us = 48.0;
  // The copy kernel on what packs, unpacks and strided local copies copy (rows of a strided block: half the columns of
  // a square matrix) and the copy engines on a contiguous local copy: lines fitted on absolute error.
  p.copy = {7.8, 1505.0};
  p.copy_engine = {5.5, 1510.0};
  // NVLink one-sided, end-to-end fits: separate copy-engine copies cost sync_us + the engine call's alpha (4 us) +
  // bytes pulled at the engines' bandwidth, the smallest separate step step_overhead_us; fused steps the fused line,
  // the smallest fused_overhead_us; kernel pulls their own bandwidth.
  p.nvlink.copy_engine = {4.0, 405.0};
  p.nvlink.kernel = {4.0, 326.0};
  p.nvlink.sync_us = 29.0;
  p.nvlink.step_overhead_us = 34.0;
  p.nvlink.copy_engine_min_row_bytes = 2048;
  p.nvlink.fused = {11.7, 475.0};
  p.nvlink.fused_overhead_us = 10.7;
  // Mapping a peer's new tensor (callers whose tensors change every call): per (rank, peer it reads) pair, as the
  // driver opens one IPC mapping after another across the host's processes, plus the host rendezvous of the exposure
  // (docs/planner.md, "Changing buffers").
  p.nvlink.map_us = 100.0;
  // Low-SM mode (PlanOptions::low_sm): an SM-kernel microsecond counts as 1.10 (the kernel's own slow-down beside a
  // GEMM) + 0.12 (the GEMM's extra slow-down against copy engines) = 1.22; docs/planner.md, "Low-SM mode".
  p.low_sm_kernel_factor = 1.22;
  return p;
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
  const Profile defaults = default_profile();
  p.copy_engine = j.contains("copy_engine") ? alpha_beta(j, "copy_engine", "") : defaults.copy_engine;
  p.nvlink = defaults.nvlink;
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
  }
  p.low_sm_kernel_factor = j.contains("low_sm_kernel_factor") ? number(j, "low_sm_kernel_factor", "", Kind::kFactor)
                                                              : defaults.low_sm_kernel_factor;
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
                     {"map_us", p.nvlink.map_us}};
  j["low_sm_kernel_factor"] = p.low_sm_kernel_factor;
  if (!p.extra_json.empty()) {
    json extra = json::parse(p.extra_json);
    for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
  }
  return detail::json_text(j) + "\n";
}

}  // namespace reshard
