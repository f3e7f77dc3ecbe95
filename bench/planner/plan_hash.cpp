// One hash of the plan JSON (or the error) of many plans, to check that a change to the planner leaves every plan
// byte for byte as it was: build this against the planner before and after and compare the printed hashes.
// Usage: plan_hash CASES SEED. Plans CASES random cases (meshes up to 4-D and 64 ranks, explicit rank orders, uneven
// shards, Partial, node sizes 1-8, peer access, budgets, chunks, low-SM, changing buffers, fusion, max_collectives,
// strategies; every fourth also as a rank plan), then the planning benchmark's meshes up to 16x64 on 4 node sizes x 4
// strategies (global plans up to 64 ranks, and rank plans). The planner's check before and after a refactoring is
// CASES 38256 with seeds 7 and 11 (48,140 plans each; docs/planner.md).
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "random_plan_requests.hpp"
#include "reshard/planner.hpp"
#include "square_case.hpp"

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

using testing::outcome;

// Random requests as tests/support/random_plan_requests.hpp draws them, at sizes past the equivalence test's.
long random_cases(int n, unsigned seed, Hash& hash) {
  std::mt19937 rng(seed);
  testing::RequestRanges ranges;
  ranges.max_mesh_dim = 8;
  ranges.sometimes_64_ranks = true;
  ranges.large_extents = true;
  ranges.max_budget_bytes = 40000;
  ranges.max_chunk_bytes = 4096;
  ranges.max_collectives = true;
  long plans = 0;
  for (int i = 0; i < n; ++i) {
    const testing::PlanRequest r = testing::random_plan_request(rng, i, ranges);
    hash.mix(outcome([&] { return make_plan(r.src, r.dst, r.dtype, r.options); }));
    ++plans;
    if (i % 4 == 0) {
      hash.mix(outcome([&] { return make_rank_plan(r.src, r.dst, r.dtype, r.rank, r.options); }));
      ++plans;
    }
  }
  return plans;
}

long benchmark_cases(Hash& hash) {
  const testing::SquareCase cases[] = {
      {"S0,S1", "S1,S0", {2, 2}, 16384},         {"S0,S0", "S1,S1", {2, 2}, 16384},
      {"S0,S1", "S1,S0", {4, 4}, 16384},         {"S0,S0", "S1,S1", {4, 4}, 16384},
      {"S0,S1", "S1,S0", {8, 8}, 16384},         {"S0,S0", "S1,S1", {8, 8}, 16384},
      {"S0,S1,R", "S1,S0,R", {8, 8, 16}, 16384}, {"S0,S0,R", "S1,S1,R", {8, 8, 16}, 16384},
      {"S0,S1", "S1,S0", {16, 64}, 16384},       {"S0,S0", "S1,S1", {16, 64}, 16384},
      {"S0,S0", "S1,S1", {4, 4}, 1000},          {"S0,S1", "S1,S0", {8, 8}, 999}};
  long plans = 0;
  for (const testing::SquareCase& c : cases) {
    const auto [src, dst] = testing::layouts(c);
    const Mesh& mesh = src.mesh();
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
