#include "reshard/plan_json.hpp"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "json/plan_recompute.hpp"
#include "plan/json_input.hpp"
#include "report/node_traffic.hpp"
#include "reshard/detail/json_text.hpp"
#include "reshard/text.hpp"

namespace reshard {
namespace {

using json = nlohmann::ordered_json;
constexpr const char* kSchema = "reshard.plan/1";

std::vector<std::string> placement_strings(const std::vector<Placement>& ps) {
  std::vector<std::string> out;
  for (const Placement& p : ps) out.push_back(to_string(p));
  return out;
}

json layout_json(const Layout& l) {
  json j;
  j["mesh"] = l.mesh().shape();
  j["placements"] = placement_strings(l.placements());
  if (l.mesh().has_explicit_ranks()) j["mesh_ranks"] = l.mesh().explicit_ranks();
  if (l.mesh().world_size() != l.mesh().size()) j["world_size"] = l.mesh().world_size();
  return j;
}

json candidates_json(const Plan& plan) {
  json cands = json::array();
  for (const Candidate& c : plan.candidates()) {
    json x;
    x["strategy"] = std::string(to_string(c.strategy));
    x["transport"] = std::string(to_string(c.transport));
    x["available"] = c.available;
    if (!c.available) x["reason"] = c.reason;
    x["estimated_us"] = c.estimated_us;
    x["steps"] = c.steps;
    x["bytes_moved"] = c.bytes_moved;
    x["peak_workspace_bytes"] = c.peak_workspace_bytes;
    x["fits_budget"] = c.fits_budget;
    x["route"] = c.route;
    cands.push_back(std::move(x));
  }
  return cands;
}

// Typed access with errors that name the field.
struct Reader {
  static const json& at(const json& obj, const std::string& key, const std::string& path) {
    if (!obj.is_object()) fail(ErrorKind::kInvalidArgument, cat("plan field '", path, "' must be an object"));
    auto it = obj.find(key);
    if (it == obj.end()) fail(ErrorKind::kInvalidArgument, cat("plan is missing field '", join(path, key), "'"));
    return *it;
  }
  static std::string join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

  static Index integer(const json& obj, const std::string& key, const std::string& path) {
    return integer_value(at(obj, key, path), join(path, key));
  }
  static Index integer_value(const json& v, const std::string& field) {
    std::optional<Index> x = detail::json_int64(v, cat("plan field '", field, "'"));
    if (!x) fail(ErrorKind::kInvalidArgument, cat("plan field '", field, "' must be an integer, got ", shown(v)));
    return *x;
  }
  // Any value, quoted safely and briefly for a message.
  static std::string shown(const json& v) { return printable(v.dump(), 80); }
  static double number(const json& obj, const std::string& key, const std::string& path) {
    const json& v = at(obj, key, path);
    if (!v.is_number())
      fail(ErrorKind::kInvalidArgument, cat("plan field '", join(path, key), "' must be a number, got ", shown(v)));
    return v.get<double>();
  }
  static bool boolean(const json& obj, const std::string& key, const std::string& path) {
    const json& v = at(obj, key, path);
    if (!v.is_boolean())
      fail(ErrorKind::kInvalidArgument,
           cat("plan field '", join(path, key), "' must be true or false, got ", shown(v)));
    return v.get<bool>();
  }
  static std::string string(const json& obj, const std::string& key, const std::string& path) {
    const json& v = at(obj, key, path);
    if (!v.is_string())
      fail(ErrorKind::kInvalidArgument, cat("plan field '", join(path, key), "' must be a string, got ", shown(v)));
    return v.get<std::string>();
  }
  static const json& array(const json& obj, const std::string& key, const std::string& path) {
    const json& v = at(obj, key, path);
    if (!v.is_array())
      fail(ErrorKind::kInvalidArgument, cat("plan field '", join(path, key), "' must be an array, got ", shown(v)));
    return v;
  }
  static std::vector<Index> integers(const json& obj, const std::string& key, const std::string& path) {
    std::vector<Index> out;
    const json& values = array(obj, key, path);
    if (values.size() > static_cast<size_t>(kMaxRanks))
      fail(ErrorKind::kInvalidArgument, cat("plan field '", join(path, key), "' has ", values.size(), " entries"));
    for (const json& v : values) out.push_back(integer_value(v, join(path, key)));
    return out;
  }
  static std::vector<int> ints(const json& obj, const std::string& key, const std::string& path) {
    std::vector<int> out;
    for (Index v : integers(obj, key, path)) {
      if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
        fail(ErrorKind::kInvalidArgument, cat("plan field '", join(path, key), "' value ", v, " is out of range"));
      out.push_back(static_cast<int>(v));
    }
    return out;
  }
  static std::vector<Placement> placements(const json& obj, const std::string& key, const std::string& path) {
    std::vector<Placement> out;
    for (const json& v : array(obj, key, path)) {
      if (!v.is_string())
        fail(ErrorKind::kInvalidArgument,
             cat("plan field '", join(path, key), "' must hold placement strings, got ", shown(v)));
      out.push_back(parse_placement(v.get<std::string>()));
    }
    return out;
  }
  static Dims dims(const json& obj, const std::string& key, const std::string& path) {
    std::vector<Index> v = integers(obj, key, path);
    if (v.size() > static_cast<size_t>(kMaxDims))
      fail(ErrorKind::kInvalidArgument, cat("plan field '", join(path, key), "' has more than ", kMaxDims, " entries"));
    return Dims::from(v);
  }
};

// A transfer of a p2p step, named `path`: from the document's element `t`, or the one read while parsing (`pre`).
Transfer read_transfer(const json& t, const std::string& path, Index world, const Transfer* pre = nullptr) {
  const Index src = pre ? pre->src : Reader::integer(t, "src", path);
  const Index dst = pre ? pre->dst : Reader::integer(t, "dst", path);
  RESHARD_REQUIRE(src >= 0 && src < world && dst >= 0 && dst < world, "plan field '", path, "': ranks ", src, " -> ",
                  dst, " outside the mesh's world (ranks 0..", world - 1, ")");
  Transfer tr;
  tr.src = static_cast<int>(src);
  tr.dst = static_cast<int>(dst);
  tr.region = pre ? pre->region : Box{Reader::dims(t, "global_offset", path), Reader::dims(t, "shape", path)};
  RESHARD_REQUIRE(tr.region.offset.size() == tr.region.shape.size(), "plan field '", path,
                  "': global_offset and shape differ in length");
  tr.bytes = pre ? pre->bytes : Reader::integer(t, "bytes", path);
  if (!pre && t.contains("via")) {
    const Index via = Reader::integer(t, "via", path);
    RESHARD_REQUIRE(via >= 0 && via < world, "plan field '", path, ".via': rank ", via,
                    " outside the mesh's world (ranks 0..", world - 1, ")");
    tr.via = static_cast<int>(via);
  }
  return tr;
}

// A step's or candidate's transport: nccl or nvlink (absent in plans written before transports: nccl).
Transport read_transport(const json& obj, const std::string& path) {
  const Transport t = parse_transport(Reader::string(obj, "transport", path));
  RESHARD_REQUIRE(t != Transport::kAuto, "plan field '", path, ".transport' must be nccl or nvlink, got auto");
  return t;
}

Layout read_layout(const json& root, const std::string& key, const Dims& shape) {
  const json& l = Reader::at(root, key, "");
  std::vector<int> mesh_shape = Reader::ints(l, "mesh", key);
  std::optional<std::vector<int>> ranks;
  if (l.contains("mesh_ranks")) ranks = Reader::ints(l, "mesh_ranks", key);
  std::optional<Index> world;
  if (l.contains("world_size")) {
    world = Reader::integer(l, "world_size", key);
    RESHARD_REQUIRE(*world >= 1 && *world <= kMaxRanks, "plan field '", key, ".world_size' must be in 1..", kMaxRanks,
                    ", got ", *world);
  }
  // The mesh refuses ranks outside the world, repeated ones and a world smaller than the mesh; name the field.
  Mesh mesh;
  try {
    mesh = Mesh(mesh_shape);
    if (ranks || world) {
      if (!ranks) {
        ranks.emplace(mesh.size());
        for (int i = 0; i < mesh.size(); ++i) (*ranks)[i] = i;
      }
      mesh = Mesh(mesh_shape, *ranks, world ? static_cast<int>(*world) : mesh.size());
    }
  } catch (const Error& e) {
    fail(e.kind(), cat("plan field '", key, "': ", e.what()));
  }
  return Layout(mesh, Reader::placements(l, "placements", key), shape);
}

}  // namespace

std::string candidates_to_json(const Plan& plan) { return detail::json_text(candidates_json(plan)); }

std::string plan_to_json(const Plan& plan) {
  json j;
  j["schema"] = kSchema;
  j["global_shape"] = plan.src().global_shape().vec();
  j["dtype"] = std::string(to_string(plan.dtype()));
  j["element_size"] = plan.element_size();
  if (plan.converts()) j["to_dtype"] = std::string(to_string(plan.target_dtype()));
  j["src"] = layout_json(plan.src());
  j["dst"] = layout_json(plan.dst());
  j["ranks_per_node"] = plan.topology().ranks_per_node;
  j["profile"] = plan.profile_name();
  if (plan.memory_budget_bytes()) j["memory_budget_bytes"] = *plan.memory_budget_bytes();
  if (plan.scope_rank()) j["rank"] = *plan.scope_rank();
  j["pipeline_chunk_bytes"] = plan.pipeline_chunk_bytes();
  j["copy_engine_min_row_bytes"] = plan.copy_engine_min_row_bytes();
  if (plan.low_sm()) j["low_sm"] = true;
  if (plan.buffers_change()) j["buffers_change"] = true;
  j["strategy"] = std::string(to_string(plan.strategy()));
  j["estimated_us"] = plan.estimated_us();
  j["bytes_moved"] = plan.bytes_moved();
  j["peak_workspace_bytes"] = plan.peak_workspace_bytes();
  if (detail::spans_nodes(plan)) {  // derived figures: a loaded plan's are recomputed
    const detail::NodeTraffic nodes = detail::node_traffic(plan);
    j["inter_node_bytes"] = nodes.crossing;
    j["min_inter_node_bytes"] = nodes.minimum ? json(*nodes.minimum) : json(nullptr);
  }
  j["candidates"] = candidates_json(plan);
  json steps = json::array();
  for (const Step& s : plan.steps()) {
    json x;
    x["kind"] = std::string(to_string(s.kind));
    if (is_communication(s.kind)) x["transport"] = std::string(to_string(s.transport));
    if (s.fused) x["fused"] = true;
    if (s.staged) x["staged"] = true;
    if (s.relayed) x["relayed"] = true;
    if (s.mixed) x["mixed"] = true;
    if (s.hierarchical) x["hierarchical"] = true;
    x["mesh_dims"] = s.mesh_dims;
    x["from"] = placement_strings(s.from);
    x["to"] = placement_strings(s.to);
    x["estimated_us"] = s.estimated_us;
    x["bytes_moved"] = s.bytes_moved;
    if (s.kind == StepKind::kP2P) {
      json ts = json::array();
      for (const Transfer& t : s.transfers) {
        ts.push_back(json{{"src", t.src},
                          {"dst", t.dst},
                          {"global_offset", t.region.offset.vec()},
                          {"shape", t.region.shape.vec()},
                          {"bytes", t.bytes}});
        if (t.via >= 0) ts.back()["via"] = t.via;
        if (s.mixed && !t.is_local())
          ts.back()["transport"] =
              std::string(to_string(one_sided_in_mixed(plan.topology(), t) ? Transport::kNvlink : Transport::kNccl));
      }
      x["transfers"] = std::move(ts);
    }
    steps.push_back(std::move(x));
  }
  j["steps"] = std::move(steps);
  return detail::json_text(j) + "\n";
}

namespace {

Plan parse_plan(const std::string& text, const Profile* profile) {
  detail::PlanTransfersRead read;  // the transfers in the planner's form, read while parsing
  const json j = detail::parse_json_input(text, "plan", detail::JsonArrayLimit{"steps", kMaxPlanFileSteps}, &read);
  if (!j.is_object()) fail(ErrorKind::kInvalidArgument, "plan must be a JSON object");
  using R = Reader;
  std::string schema = R::string(j, "schema", "");
  RESHARD_REQUIRE(schema == kSchema, "plan field 'schema' must be \"", kSchema, "\", got \"", printable(schema, 80),
                  "\"");
  PlanSpec spec;
  Dims shape = R::dims(j, "global_shape", "");
  spec.src = read_layout(j, "src", shape);
  spec.dst = read_layout(j, "dst", shape);
  spec.dtype = parse_dtype(R::string(j, "dtype", ""));
  RESHARD_REQUIRE(R::integer(j, "element_size", "") == element_size(spec.dtype),
                  "plan field 'element_size' does not match dtype ", to_string(spec.dtype));
  if (j.contains("to_dtype")) spec.to_dtype = parse_dtype(R::string(j, "to_dtype", ""));  // validate_plan checks it
  Index rpn = R::integer(j, "ranks_per_node", "");
  RESHARD_REQUIRE(rpn >= 1 && rpn <= std::numeric_limits<int>::max(), "plan field 'ranks_per_node' must be >= 1, got ",
                  rpn);
  spec.topology.ranks_per_node = static_cast<int>(rpn);
  spec.profile_name = R::string(j, "profile", "");
  if (j.contains("memory_budget_bytes")) {
    spec.memory_budget_bytes = R::integer(j, "memory_budget_bytes", "");
    RESHARD_REQUIRE(*spec.memory_budget_bytes >= 0, "plan field 'memory_budget_bytes' must be >= 0, got ",
                    *spec.memory_budget_bytes);
  }
  if (j.contains("rank")) {
    const Index rank = R::integer(j, "rank", "");
    RESHARD_REQUIRE(rank >= 0 && rank < spec.src.mesh().world_size(), "plan field 'rank': rank ", rank,
                    " is not in mesh ", spec.src.mesh().str(), " (ranks 0..", spec.src.mesh().world_size() - 1, ")");
    spec.scope_rank = static_cast<int>(rank);
  }
  spec.pipeline_chunk_bytes = R::integer(j, "pipeline_chunk_bytes", "");
  if (j.contains("copy_engine_min_row_bytes"))
    spec.copy_engine_min_row_bytes = R::integer(j, "copy_engine_min_row_bytes", "");
  if (j.contains("low_sm")) spec.low_sm = R::boolean(j, "low_sm", "");
  if (j.contains("buffers_change")) spec.buffers_change = R::boolean(j, "buffers_change", "");
  spec.strategy = parse_strategy(R::string(j, "strategy", ""));
  spec.estimated_us = R::number(j, "estimated_us", "");
  spec.bytes_moved = R::integer(j, "bytes_moved", "");
  spec.peak_workspace_bytes = R::integer(j, "peak_workspace_bytes", "");
  // Candidates are optional (the chosen one is recomputed from the steps; the others are range-checked).
  const json no_candidates = json::array();
  const json& cands = j.contains("candidates") ? R::array(j, "candidates", "") : no_candidates;
  for (size_t i = 0; i < cands.size(); ++i) {
    std::string path = cat("candidates[", i, "]");
    const json& c = cands[i];
    Candidate x;
    x.strategy = parse_strategy(R::string(c, "strategy", path));
    if (c.contains("transport")) x.transport = read_transport(c, path);
    x.available = R::boolean(c, "available", path);
    if (!x.available) x.reason = R::string(c, "reason", path);
    x.estimated_us = R::number(c, "estimated_us", path);
    const Index steps = R::integer(c, "steps", path);
    RESHARD_REQUIRE(steps >= 0 && steps <= std::numeric_limits<int>::max(), "plan field '", path,
                    ".steps' must be a step count, got ", steps);
    x.steps = static_cast<int>(steps);
    x.bytes_moved = R::integer(c, "bytes_moved", path);
    x.peak_workspace_bytes = R::integer(c, "peak_workspace_bytes", path);
    x.fits_budget = R::boolean(c, "fits_budget", path);
    x.route = R::string(c, "route", path);
    spec.candidates.push_back(std::move(x));
  }
  const json& steps = R::array(j, "steps", "");
  size_t transfers = 0;  // over all steps, at most kMaxPlanTransfers
  for (size_t i = 0; i < steps.size(); ++i) {
    std::string path = cat("steps[", i, "]");
    const json& s = steps[i];
    Step x;
    x.kind = parse_step_kind(R::string(s, "kind", path));
    if (s.contains("transport")) x.transport = read_transport(s, path);
    if (s.contains("fused")) x.fused = R::boolean(s, "fused", path);
    if (s.contains("staged")) x.staged = R::boolean(s, "staged", path);
    if (s.contains("relayed")) x.relayed = R::boolean(s, "relayed", path);
    if (s.contains("mixed")) x.mixed = R::boolean(s, "mixed", path);
    if (s.contains("hierarchical")) x.hierarchical = R::boolean(s, "hierarchical", path);
    x.mesh_dims = R::ints(s, "mesh_dims", path);
    x.from = R::placements(s, "from", path);
    x.to = R::placements(s, "to", path);
    x.estimated_us = R::number(s, "estimated_us", path);
    x.bytes_moved = R::integer(s, "bytes_moved", path);
    if (x.kind == StepKind::kP2P) {
      const json& ts = R::array(s, "transfers", path);
      transfers += ts.size();
      RESHARD_REQUIRE(transfers <= kMaxPlanTransfers, "plan field '", path, ".transfers': the plan holds more than ",
                      kMaxPlanTransfers, " transfers, the most a plan holds");
      // Transfers read while parsing get the checks read_transfer makes as it reads the others, in the same order;
      // one that fails them is refused by read_transfer, naming its field.
      const Index world = spec.src.mesh().world_size();
      const auto check = [&](size_t t, const Transfer& tr) {
        if (tr.src < 0 || tr.src >= world || tr.dst < 0 || tr.dst >= world ||
            tr.region.offset.size() != tr.region.shape.size())
          read_transfer(ts[t], cat(path, ".transfers[", t, "]"), world, &tr);
      };
      detail::PlanTransfersRead::Step* pre = i < read.steps.size() ? &read.steps[i] : nullptr;
      if (pre && pre->read.size() != ts.size()) pre = nullptr;
      if (pre && std::all_of(pre->read.begin(), pre->read.end(), [](char r) { return r != 0; })) {
        x.transfers = std::move(pre->transfers);  // every one read while parsing: kept where it is
        for (size_t t = 0; t < x.transfers.size(); ++t) check(t, x.transfers[t]);
      } else {
        x.transfers.reserve(ts.size());
        for (size_t t = 0; t < ts.size(); ++t) {
          if (pre && pre->read[t]) {
            check(t, pre->transfers[t]);
            x.transfers.push_back(pre->transfers[t]);
          } else {
            x.transfers.push_back(read_transfer(ts[t], cat(path, ".transfers[", t, "]"), world));
          }
        }
      }
      // A transfer's transport, where given, is the one the step runs it on (plan.hpp: mixed steps).
      for (size_t t = 0; t < ts.size(); ++t) {
        if (!ts[t].is_object() || !ts[t].contains("transport")) continue;
        const std::string at = cat(path, ".transfers[", t, "]");
        const Transport given = read_transport(ts[t], at);
        const Transfer& tr = x.transfers[t];
        const Transport runs =
            x.mixed && !tr.is_local() && one_sided_in_mixed(spec.topology, tr) ? Transport::kNvlink : x.transport;
        RESHARD_REQUIRE(given == runs, "plan field '", at, ".transport' says ", to_string(given),
                        ", but the step runs that transfer on ", to_string(runs));
      }
    } else if (s.contains("transfers")) {
      fail(ErrorKind::kInvalidArgument, cat("plan field '", path, ".transfers' is only allowed on p2p steps"));
    }
    spec.steps.push_back(std::move(x));
  }
  // Structure first (clear messages for broken plans), then what a valid plan may still get wrong: transfers that
  // are not the planner's (ranks would disagree), and summary figures, which are recomputed rather than trusted.
  validate_plan(spec);
  detail::check_planner_transfers(spec);
  const Profile by_name = default_profile();
  if (!profile && spec.profile_name == by_name.name) profile = &by_name;
  detail::recompute_summary(spec, profile);
  // validate_plan passed and the recomputation changed only figures: trusted_plan checks those (validate_metadata).
  return detail::trusted_plan(std::move(spec));
}

Plan load_plan_file(const std::string& path, const Profile* profile) {
  std::string text = read_text_file(path, "plan", kMaxPlanFileBytes);
  try {
    return parse_plan(text, profile);
  } catch (const Error& e) {
    fail(e.kind(), cat(printable(path), ": ", e.what()));
  }
}

}  // namespace

Plan plan_from_json(const std::string& text) { return parse_plan(text, nullptr); }
Plan plan_from_json(const std::string& text, const Profile& profile) { return parse_plan(text, &profile); }

Plan load_plan(const std::string& path) { return load_plan_file(path, nullptr); }
Plan load_plan(const std::string& path, const Profile& profile) { return load_plan_file(path, &profile); }

}  // namespace reshard
