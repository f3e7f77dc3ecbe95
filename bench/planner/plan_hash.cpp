// One hash of the plan JSON (or the error) of many plans, to check that a change to the planner leaves every plan
// byte for byte as it was: build this against the planner before and after and compare the printed hashes.
// Usage: plan_hash CASES SEED. Plans CASES random cases (meshes up to 4-D and 64 ranks, explicit rank orders, uneven
// shards, Partial, node sizes 1-8, peer access, budgets, chunks, low-SM, changing buffers, fusion, max_collectives,
// strategies; every fourth also as a rank plan), then the planning benchmark's meshes up to 16x64 on 4 node sizes x 4
// strategies (global plans up to 64 ranks, and rank plans). The planner's check before and after a refactoring is
// CASES 38256 with seeds 7 and 11 (48,140 plans each; docs/planner.md).
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "reshard/plan_json.hpp"
#include "reshard/planner.hpp"

namespace reshard {
namespace {

// FNV-1a over every plan's text, with a separator after each.
class Hash {
 public:
  void mix(const std::string& s) {
    for (unsigned char c : s) h_ = (h_ ^ c) * 1099511628211ull;
    h_ = (h_ ^ 0xff) * 1099511628211ull;
  }
  std::uint64_t value() const { return h_; }

 private:
  std::uint64_t h_ = 1469598103934665603ull;
};

std::string outcome(const std::function<Plan()>& plan) {
  try {
    return plan_to_json(plan());
  } catch (const Error& e) {
    return std::string("error: ") + e.what();
  }
}

long random_cases(int n, unsigned seed, Hash& hash) {
  std::mt19937 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const DType dtypes[] = {DType::kBF16, DType::kF32, DType::kF64, DType::kU8};
  long plans = 0;
  for (int i = 0; i < n; ++i) {
    std::vector<int> mesh_shape(pick(1, 4));
    int ranks = 1;
    const int cap = pick(0, 3) == 0 ? 64 : 24;
    for (int& m : mesh_shape) {
      m = pick(1, std::max(1, std::min(8, cap / ranks)));
      ranks *= m;
    }
    std::vector<int> order(ranks);
    std::iota(order.begin(), order.end(), 0);
    if (pick(0, 4) == 0) std::shuffle(order.begin(), order.end(), rng);
    const Mesh mesh = pick(0, 4) == 0 ? Mesh(mesh_shape, order) : Mesh(mesh_shape);
    const int nd = pick(1, 3);
    Dims shape(nd);
    for (int d = 0; d < nd; ++d) shape[d] = pick(0, 3) == 0 ? pick(0, 7) : pick(0, 1) ? pick(8, 40) : pick(100, 5000);
    auto random_placements = [&](int partial_weight) {
      std::vector<Placement> ps;
      const auto op = static_cast<ReduceOp>(pick(0, 3));
      for (size_t k = 0; k < mesh_shape.size(); ++k) {
        const int c = pick(0, nd + partial_weight);
        ps.push_back(c == 0 ? Placement::replicate() : c <= nd ? Placement::shard(c - 1) : Placement::partial(op));
      }
      return ps;
    };
    const Layout src(mesh, random_placements(1), shape), dst(mesh, random_placements(pick(0, 1)), shape);
    const DType dtype = dtypes[i % 4];
    PlanOptions o;
    o.topology.ranks_per_node = pick(1, 8);
    o.topology.peer_access = pick(0, 5) != 0;
    const int strategy = pick(0, 7);
    o.strategy = strategy < 5 ? Strategy::kAuto : static_cast<Strategy>(strategy - 4);
    if (pick(0, 5) == 0) o.memory_budget_bytes = pick(0, 40000);
    if (pick(0, 5) == 0) o.pipeline_chunk_bytes = pick(1, 4096);
    o.low_sm = pick(0, 3) == 0;
    o.buffers_change = pick(0, 3) == 0;
    o.fusion = static_cast<Fusion>(pick(0, 2));
    if (pick(0, 3) == 0) o.max_collectives = pick(0, 4);
    const int rank = pick(0, ranks - 1);
    hash.mix(outcome([&] { return make_plan(src, dst, dtype, o); }));
    ++plans;
    if (i % 4 == 0) {
      hash.mix(outcome([&] { return make_rank_plan(src, dst, dtype, rank, o); }));
      ++plans;
    }
  }
  return plans;
}

long benchmark_cases(Hash& hash) {
  struct Case {
    const char* from;
    const char* to;
    std::vector<int> mesh;
    Index extent;
  };
  const Case cases[] = {{"S0,S1", "S1,S0", {2, 2}, 16384},         {"S0,S0", "S1,S1", {2, 2}, 16384},
                        {"S0,S1", "S1,S0", {4, 4}, 16384},         {"S0,S0", "S1,S1", {4, 4}, 16384},
                        {"S0,S1", "S1,S0", {8, 8}, 16384},         {"S0,S0", "S1,S1", {8, 8}, 16384},
                        {"S0,S1,R", "S1,S0,R", {8, 8, 16}, 16384}, {"S0,S0,R", "S1,S1,R", {8, 8, 16}, 16384},
                        {"S0,S1", "S1,S0", {16, 64}, 16384},       {"S0,S0", "S1,S1", {16, 64}, 16384},
                        {"S0,S0", "S1,S1", {4, 4}, 1000},          {"S0,S1", "S1,S0", {8, 8}, 999}};
  long plans = 0;
  for (const Case& c : cases) {
    const Mesh mesh(c.mesh);
    const Layout src(mesh, parse_placements(c.from), Dims{c.extent, c.extent});
    const Layout dst(mesh, parse_placements(c.to), Dims{c.extent, c.extent});
    for (int rpn : {1, 4, 8, 16}) {
      for (Strategy s : {Strategy::kAuto, Strategy::kCollective, Strategy::kP2P, Strategy::kHybrid}) {
        PlanOptions o;
        o.topology.ranks_per_node = rpn;
        o.strategy = s;
        if (mesh.size() <= 64) {
          hash.mix(outcome([&] { return make_plan(src, dst, DType::kBF16, o); }));
          ++plans;
        }
        hash.mix(outcome([&] { return make_rank_plan(src, dst, DType::kBF16, mesh.size() / 2 + 1, o); }));
        ++plans;
      }
    }
  }
  return plans;
}

}  // namespace
}  // namespace reshard

namespace {

// A whole number from 0 to `most` (the whole argument, decimal), or nullopt.
std::optional<long long> whole(const char* text, long long most) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < 0 || v > most) return std::nullopt;
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  const std::optional<long long> cases = argc == 3 ? whole(argv[1], 10'000'000) : std::nullopt;
  const std::optional<long long> seed = argc == 3 ? whole(argv[2], 0xffffffffLL) : std::nullopt;
  if (!cases || !seed) {
    std::fprintf(stderr, "usage: plan_hash CASES SEED (CASES 0..10000000, SEED 0..4294967295)\n");
    return 2;
  }
  reshard::Hash hash;
  long plans = reshard::random_cases(static_cast<int>(*cases), static_cast<unsigned>(*seed), hash);
  plans += reshard::benchmark_cases(hash);
  std::printf("%ld plans hash %016llx\n", plans, static_cast<unsigned long long>(hash.value()));
  return 0;
}
