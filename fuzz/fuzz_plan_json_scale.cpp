// Fuzzes the plan JSON loader at scale: the input picks a large plan the planner makes (a chain of thousands of
// collective steps, or a p2p step with every pair of up to 48 ranks' transfers), then splices JSON fragments into its
// text at places it picks (anywhere, or just before a step or a transfer far into the document). Whatever comes out
// is loaded: a plan that loads round-trips and its strategy agrees with its steps, anything else is one reshard::Error
// that is not kInternal, and libFuzzer's -timeout and -rss_limit_mb bound the time and memory a document of this size
// may take.
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>

#include "fuzz_common.hpp"
#include "reshard/plan_json.hpp"
#include "reshard/planner.hpp"

namespace {

using namespace reshard;
using json = nlohmann::ordered_json;

// A plan's text: `steps` pairs of all_gather + local steps (S0 -> R -> S0 ...) on mesh `ranks`, or (steps == 0) the
// p2p plan S0 -> S1 of a ranks x ranks tensor (a transfer per pair of ranks). Built once per shape.
const std::string& base_plan(int ranks, int steps) {
  static std::map<std::pair<int, int>, std::string> made;
  auto [it, fresh] = made.try_emplace({ranks, steps});
  if (!fresh) return it->second;
  const Mesh mesh({ranks});
  PlanOptions o;
  o.strategy = steps == 0 ? Strategy::kP2P : Strategy::kCollective;
  const Dims shape{ranks, ranks};
  const Plan plan = make_plan(Layout(mesh, parse_placements("S0"), shape),
                              Layout(mesh, parse_placements(steps == 0 ? "S1" : "R"), shape), DType::kF32, o);
  json j = json::parse(plan_to_json(plan));
  if (steps > 0) {
    const json gather = j["steps"][0];
    json local = gather;
    local["kind"] = "local";
    local.erase("transport");
    local["from"] = gather["to"];
    local["to"] = gather["from"];
    local["bytes_moved"] = 0;
    json chain = json::array();
    for (int i = 0; i < steps; ++i) {
      chain.push_back(gather);
      if (i + 1 < steps) chain.push_back(local);
    }
    j["steps"] = std::move(chain);
    j["candidates"] = json::array();
  }
  it->second = j.dump();
  return it->second;
}

// Fragments spliced in: structure, wrong types, huge and negative numbers, names the readers know.
constexpr const char* kFragments[] = {
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "null",
    "true",
    "1e999",
    "-1",
    "2147483648",
    "9223372036854775808",
    "1.5",
    "\"p2p\"",
    "\"local\"",
    "\"nvlink\"",
    "\"auto\"",
    "\"S1\"",
    "\"P(max)\"",
    "\"kind\"",
    "\"transfers\"",
    "\"src\":",
    "\"dst\":",
    "\"shape\":[1,1],",
    "\"global_offset\":[0],",
    "\"mesh_dims\":[0,0],",
    "\"fused\":true,",
    "{\"kind\":\"local\",\"mesh_dims\":[],\"from\":[\"R\"],\"to\":[\"R\"],"
    "\"estimated_us\":0,\"bytes_moved\":0},",
    "\"steps\":[],",
    "\\u0000",
    "\x1b[31m",
    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
};

// The n-th occurrence (wrapping) of `needle` in `text`, or a plain position.
size_t place(const std::string& text, const char* needle, int n, int plain) {
  size_t at = std::string::npos;
  for (int i = 0, from = 0; i <= n; ++i) {
    const size_t next = text.find(needle, static_cast<size_t>(from));
    if (next == std::string::npos) break;
    at = next;
    from = static_cast<int>(next + 1);
  }
  return at != std::string::npos ? at : static_cast<size_t>(plain) * text.size() / 256;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Bytes in(data, size);
  const int ranks = in.next(2, 48);
  const int steps = in.next(0, 1) ? 0 : 256 * in.next(1, 16);  // 0: one p2p step with ranks^2 transfers
  std::string text = base_plan(ranks, steps);
  const int edits = in.next(0, 4);
  for (int e = 0; e < edits && !in.empty(); ++e) {
    const int where = in.next(0, 3), n = in.next(0, 255) * in.next(1, 64), plain = in.next(0, 255);
    const size_t at = std::min(text.size(), where == 0   ? place(text, "{\"kind\"", n, plain)
                                            : where == 1 ? place(text, "{\"src\"", n, plain)
                                            : where == 2 ? place(text, ":", n, plain)
                                                         : static_cast<size_t>(plain) * text.size() / 256);
    const std::string fragment = kFragments[in.next(0, static_cast<int>(std::size(kFragments)) - 1)];
    const size_t cut = static_cast<size_t>(in.next(0, 3)) * in.next(0, 8);  // bytes removed there
    text.replace(at, std::min(cut, text.size() - at), fragment);
  }
  fuzz::only_reshard_errors([&] {
    const Plan plan = fuzz::round_trip(
        text, [](const std::string& t) { return plan_from_json(t); }, plan_to_json);
    // The strategy a loaded plan shows is one its steps make: no p2p step in a collective plan, no collective step in
    // a p2p plan, and both kinds (or a local step before the p2p one) in a hybrid plan.
    bool p2p = false, collective = false, local_first = false;
    for (const Step& s : plan.steps()) {
      collective = collective || (s.kind != StepKind::kP2P && s.kind != StepKind::kLocal);
      local_first = local_first || (s.kind == StepKind::kLocal && !p2p);
      p2p = p2p || s.kind == StepKind::kP2P;
    }
    const bool agrees = plan.strategy() == Strategy::kCollective ? !p2p
                        : plan.strategy() == Strategy::kP2P      ? !collective
                                                                 : p2p && (collective || local_first);
    if (!agrees) std::abort();
  });
  return 0;
}
