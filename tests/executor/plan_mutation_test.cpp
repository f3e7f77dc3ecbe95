// Property test: mutated plans are refused or run correctly (issue 24).
//
// Valid plans from the planner (every strategy, global and rank-scoped, small meshes, Partial included) are dumped to
// JSON and mutated at random: numbers nudged, wrapped or made huge, strings swapped for other placements or kinds,
// array entries dropped, repeated or swapped, fields removed, transfers re-aimed at other ranks with their byte count
// made consistent. Every mutant must be refused by the loader with a reshard::Error, or run on the host backend and
// give every rank exactly the right elements, checked one by one against the pattern (verify/, independent of the
// executor) in buffers of exactly the layout's size with guard bytes around the output. A rank-scoped mutant runs
// with the other ranks' unmutated plans, as in a real job; there a clean runtime error is also acceptable (a plan
// cannot know what its peers' plans say), wrong data never. Under AddressSanitizer every access is checked too.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "reshard/executor.hpp"
#include "reshard/host_backend.hpp"
#include "reshard/pattern.hpp"
#include "reshard/plan_json.hpp"
#include "reshard/planner.hpp"

namespace reshard {
namespace {

using json = nlohmann::ordered_json;

#if defined(__SANITIZE_ADDRESS__)
constexpr int kDefaultMutants = 1000;  // ASan + UBSan run the suite 3-5x slower
#else
constexpr int kDefaultMutants = 4000;
#endif

int mutant_count() {
  const char* env = std::getenv("RESHARD_MUTANTS");
  return env && std::atoi(env) > 0 ? std::atoi(env) : kDefaultMutants;
}

struct Seed {
  std::string text;  // the valid plan's JSON
  int scope = -1;    // rank of a rank-scoped plan
  int index = 0;     // into the seed cases: the peers' plans of a scoped seed
};

struct Case {
  Layout src, dst;
  DType dtype;
  std::vector<std::vector<Plan>> rank_plans;  // per strategy tried: every rank's plan
};

std::vector<Case> cases() {
  auto layouts = [](std::vector<int> mesh, const char* from, const char* to, Dims shape, DType dtype) {
    Layout src(Mesh(std::move(mesh)), parse_placements(from), shape);
    return Case{src, src.with_placements(parse_placements(to)), dtype, {}};
  };
  return {layouts({4}, "S0", "S1", Dims{6, 10}, DType::kF32),
          layouts({2, 2}, "S0,S1", "S1,S0", Dims{7, 5}, DType::kI32),
          layouts({2, 2}, "R,S0", "S1,R", Dims{6, 3, 2}, DType::kBF16),
          layouts({2, 3}, "S1,S0", "S0,R", Dims{9, 4}, DType::kF64),
          layouts({4}, "P", "S0", Dims{6, 5}, DType::kF32),
          layouts({2, 2}, "P(max),S1", "R,S0", Dims{5, 6}, DType::kI8),
          layouts({2, 2}, "S0,P(avg)", "S1,R", Dims{4, 6}, DType::kI32),
          layouts({2, 2}, "S0,S1", "R,P", Dims{4, 4}, DType::kF32)};
}

std::vector<Seed> seeds(std::vector<Case>& all) {
  std::vector<Seed> out;
  for (size_t c = 0; c < all.size(); ++c) {
    Case& k = all[c];
    for (Strategy s : {Strategy::kCollective, Strategy::kP2P, Strategy::kHybrid}) {
      PlanOptions o;
      o.strategy = s;
      try {
        Plan global = make_plan(k.src, k.dst, k.dtype, o);
        out.push_back(Seed{plan_to_json(global), -1, static_cast<int>(c)});
        std::vector<Plan> ranks;
        for (int r = 0; r < k.src.mesh().size(); ++r) ranks.push_back(make_rank_plan(k.src, k.dst, k.dtype, r, o));
        const int scoped = static_cast<int>(k.rank_plans.size());
        k.rank_plans.push_back(ranks);
        for (int r = 0; r < k.src.mesh().size(); ++r)
          out.push_back(Seed{plan_to_json(ranks[r]), r, static_cast<int>(c) * 16 + scoped});
      } catch (const Error&) {
        // this strategy has no plan for the case (e.g. hybrid with one changing mesh dim)
      }
    }
  }
  return out;
}

// ---- mutations ---------------------------------------------------------------------------------------------------

class Mutator {
 public:
  explicit Mutator(std::uint64_t seed) : rng_(seed) {}

  void mutate(json& doc) {
    const int edits = 1 + pick(3);
    for (int e = 0; e < edits; ++e) {
      if (pick(3) == 0 && retarget_transfer(doc)) continue;
      std::vector<json::json_pointer> paths;
      collect(doc, json::json_pointer(), paths);
      const json::json_pointer at = paths[pick(static_cast<int>(paths.size()))];
      edit(doc, at);
    }
  }

 private:
  int pick(int n) { return static_cast<int>(rng_() % static_cast<std::uint64_t>(n)); }

  static void collect(const json& j, const json::json_pointer& at, std::vector<json::json_pointer>& out) {
    out.push_back(at);
    if (j.is_object())
      for (auto it = j.begin(); it != j.end(); ++it) collect(*it, at / it.key(), out);
    if (j.is_array())
      for (size_t i = 0; i < j.size(); ++i) collect(j[i], at / i, out);
  }

  json integer_like(Index v) {
    const Index big = Index(1) << 62;
    switch (pick(12)) {
      case 0:
        return v + 1;
      case 1:
        return v - 1;
      case 2:
        return 0;
      case 3:
        return -1 - pick(3);
      case 4:
        return (Index(1) << 32) + v;
      case 5:
        return big;
      case 6:
        return std::numeric_limits<Index>::max();
      case 7:
        return std::numeric_limits<Index>::min();
      case 8:
        return v * 2;
      case 9:
        return 18446744073709551615ull;
      case 10:
        return (Index(1) << 59) - 32 + v;
      default:
        return pick(9);
    }
  }

  json string_like(const std::string& s) {
    static const char* placements[] = {"R", "S0", "S1", "S2", "S-1", "P", "P(max)", "P(avg)", "P(min)", "S9"};
    static const char* words[] = {
        "p2p",  "all_gather", "all_to_all", "reduce_scatter", "all_reduce", "local", "f32",       "i32",
        "bf16", "i8",         "collective", "hybrid",         "auto",       "",      "\n\x1b[2J", "reshard.plan/1"};
    if (!s.empty() && (s[0] == 'S' || s[0] == 'R' || s[0] == 'P') && s.size() < 8) return placements[pick(10)];
    return words[pick(16)];
  }

  void edit(json& doc, const json::json_pointer& at) {
    json& v = doc[at];
    switch (v.type()) {
      case json::value_t::number_integer:
      case json::value_t::number_unsigned:
        if (pick(8) == 0) {
          v = "7";
        } else {
          const Index x = v.is_number_unsigned() ? 0 : v.get<Index>();
          v = integer_like(std::abs(x) < (Index(1) << 60) ? x : 0);
        }
        return;
      case json::value_t::number_float: {
        const double options[] = {0.0, -1.0, 1.7e308, v.get<double>() * 2, 1e-300};
        v = options[pick(5)];
        return;
      }
      case json::value_t::string:
        v = string_like(v.get<std::string>());
        return;
      case json::value_t::boolean:
        v = !v.get<bool>();
        return;
      case json::value_t::array: {
        if (v.empty()) {
          v.push_back(pick(4));
          return;
        }
        const size_t i = static_cast<size_t>(pick(static_cast<int>(v.size())));
        switch (pick(4)) {
          case 0:
            v.erase(i);
            return;
          case 1:
            v.push_back(v[i]);
            return;
          case 2:
            std::swap(v[i], v[static_cast<size_t>(pick(static_cast<int>(v.size())))]);
            return;
          default:
            v.clear();
            return;
        }
      }
      case json::value_t::object: {
        if (v.empty() || at.empty()) return;
        auto it = v.begin();
        std::advance(it, pick(static_cast<int>(v.size())));
        v.erase(it);
        return;
      }
      default:
        v = json();
    }
  }

  // Aims a transfer at another rank or region, keeping its byte count consistent with its region.
  bool retarget_transfer(json& doc) {
    if (!doc.contains("steps") || !doc["steps"].is_array()) return false;
    std::vector<json*> transfers;
    for (json& s : doc["steps"])
      if (s.is_object() && s.contains("transfers") && s["transfers"].is_array())
        for (json& t : s["transfers"]) transfers.push_back(&t);
    if (transfers.empty()) return false;
    json& t = *transfers[static_cast<size_t>(pick(static_cast<int>(transfers.size())))];
    if (!t.is_object() || !t.contains("shape") || !t["shape"].is_array() || !t.contains("global_offset")) return false;
    auto nudge = [&](json& list) {
      if (!list.is_array() || list.empty()) return;
      json& x = list[static_cast<size_t>(pick(static_cast<int>(list.size())))];
      if (x.is_number_integer() && std::abs(x.get<Index>()) < (Index(1) << 40)) x = x.get<Index>() + pick(3) - 1;
    };
    switch (pick(5)) {
      case 4: {
        // The issue's probe: offset + shape wraps around to the old end, the byte count stays (int64 wraps the same).
        json &off = t["global_offset"], &shape = t["shape"];
        if (!off.is_array() || off.empty() || off.size() != shape.size()) return false;
        const size_t d = static_cast<size_t>(pick(static_cast<int>(off.size())));
        if (!off[d].is_number_integer() || !shape[d].is_number_integer()) return false;
        const std::uint64_t x = std::uint64_t(1) << (59 + pick(4));
        off[d] = static_cast<Index>(static_cast<std::uint64_t>(off[d].get<Index>()) + x);
        shape[d] = static_cast<Index>(static_cast<std::uint64_t>(shape[d].get<Index>()) - x);
        return true;
      }
      case 0:
        t["src"] = pick(6);
        break;
      case 1:
        t["dst"] = pick(6);
        break;
      case 2:
        nudge(t["global_offset"]);
        break;
      default:
        nudge(t["shape"]);
    }
    Index elements = 1;
    for (const json& x : t["shape"])
      if (x.is_number_integer() && __builtin_mul_overflow(elements, x.get<Index>(), &elements)) elements = 0;
    const Index es =
        doc.contains("element_size") && doc["element_size"].is_number_integer() ? doc["element_size"].get<Index>() : 4;
    Index bytes = 0;
    t["bytes"] = __builtin_mul_overflow(elements, es, &bytes) ? 0 : bytes;
    return true;
  }

  std::mt19937_64 rng_;
};

// ---- execution ---------------------------------------------------------------------------------------------------

constexpr size_t kGuard = 64;
constexpr unsigned char kGuardByte = 0xEB;

struct Outcome {
  Index wrong = 0;
  bool guard_broken = false;
  bool failed = false;  // a reshard::Error at run time
  std::string error;
};

// Runs plans[r] on rank r of a host world, every rank's input filled with its pattern in a buffer of exactly its
// source box, and counts the wrong elements of every rank's output against the expected values.
Outcome execute(const std::vector<const Plan*>& plans, std::chrono::milliseconds timeout) {
  const Plan& ref = *plans[0];
  const int n = ref.src().mesh().size();
  const int es = ref.element_size();
  Outcome out;
  std::vector<Index> wrong(n, 0);
  std::vector<char> broken(n, 0);
  HostWorld world(n, HostWorldOptions{timeout});
  try {
    run_ranks(
        n,
        [&](int r) {
          const Plan& plan = *plans[r];
          HostCommunicator comm(world, r);
          HostDevice device;
          Executor exec(plan, comm, device, ExecutorOptions{timeout});
          std::vector<unsigned char> input(static_cast<size_t>(volume(plan.src().box(r)) * es));
          const size_t out_bytes = static_cast<size_t>(volume(plan.dst().box(r)) * es);
          std::vector<unsigned char> output(out_bytes + 2 * kGuard, kGuardByte);
          fill_local(input.data(), plan.src(), r, plan.dtype());
          for (int poison : {0xA5, 0x5A}) {
            std::memset(output.data() + kGuard, poison, out_bytes);
            exec.run({input.data(), input.size()}, {output.data() + kGuard, out_bytes}, nullptr);
            exec.wait(nullptr);
            wrong[r] += count_local_mismatches(output.data() + kGuard, plan.src(), plan.dst(), r, plan.dtype());
          }
          for (size_t i = 0; i < kGuard; ++i)
            broken[r] |= output[i] != kGuardByte || output[kGuard + out_bytes + i] != kGuardByte;
        },
        &world);
  } catch (const Error& e) {
    out.failed = true;
    out.error = e.what();
  }
  for (int r = 0; r < n; ++r) {
    out.wrong += wrong[r];
    out.guard_broken = out.guard_broken || broken[r];
  }
  return out;
}

TEST(PlanMutation, EveryMutantIsRefusedOrRunsCorrectly) {
  std::vector<Case> all = cases();
  const std::vector<Seed> pool = seeds(all);
  ASSERT_GE(pool.size(), 40u);
  // The seeds themselves run correctly (the harness of this test is sound).
  for (const Case& k : all) {
    ASSERT_FALSE(k.rank_plans.empty());
    std::vector<const Plan*> ranks;
    for (const Plan& p : k.rank_plans[0]) ranks.push_back(&p);
    Outcome o = execute(ranks, std::chrono::seconds(10));
    ASSERT_FALSE(o.failed) << o.error;
    ASSERT_EQ(o.wrong, 0);
  }
  const int total = mutant_count();
  int refused = 0, ran_global = 0, ran_scoped = 0, scoped_errors = 0, scoped_elsewhere = 0;
  Mutator mutator(20261124);
  for (int m = 0; m < total; ++m) {
    const Seed& seed = pool[static_cast<size_t>(m) % pool.size()];
    json doc = json::parse(seed.text);
    mutator.mutate(doc);
    const std::string text = doc.dump();
    std::optional<Plan> mutant;
    try {
      mutant.emplace(plan_from_json(text));
    } catch (const Error&) {
      ++refused;  // a clear refusal; anything else escaping fails the test
      continue;
    }
    SCOPED_TRACE("mutant " + std::to_string(m) + ": " + text);
    if (!mutant->scope_rank()) {
      std::vector<const Plan*> ranks(static_cast<size_t>(mutant->src().mesh().size()), &*mutant);
      if (ranks.size() > 16) continue;
      Outcome o = execute(ranks, std::chrono::seconds(10));
      EXPECT_FALSE(o.failed) << o.error;  // a plan every rank shares is consistent by construction
      EXPECT_EQ(o.wrong, 0);
      EXPECT_FALSE(o.guard_broken);
      ++ran_global;
      continue;
    }
    const Case& k = all[static_cast<size_t>(seed.index / 16)];
    const std::vector<Plan>& peers = k.rank_plans[static_cast<size_t>(seed.index % 16)];
    const int r = *mutant->scope_rank();
    if (!(mutant->src() == k.src && mutant->dst() == k.dst && mutant->dtype() == k.dtype)) {
      ++scoped_elsewhere;  // a valid plan of another redistribution: its peers' plans are of this one, not comparable
      continue;
    }
    std::vector<const Plan*> ranks;
    for (const Plan& p : peers) ranks.push_back(&p);
    ranks[static_cast<size_t>(r)] = &*mutant;
    Outcome o = execute(ranks, std::chrono::milliseconds(300));
    EXPECT_FALSE(o.guard_broken);
    if (o.failed) {
      ++scoped_errors;  // the ranks' plans disagree (e.g. another pipeline chunk): a clean error, no data
    } else {
      EXPECT_EQ(o.wrong, 0);
      ++ran_scoped;
    }
  }
  std::printf(
      "%d mutants: %d refused, %d global and %d rank-scoped ran correctly, %d scoped failed cleanly, %d scoped "
      "described another redistribution\n",
      total, refused, ran_global, ran_scoped, scoped_errors, scoped_elsewhere);
  EXPECT_GE(total, kDefaultMutants);
  EXPECT_GT(ran_global + ran_scoped, total / 20) << "too few mutants ran: the test would check little";
}

}  // namespace
}  // namespace reshard
