// Planning time (Google Benchmark): auto plans and per-rank plans on meshes from 2x2 to 16384 ranks, for the seed
// experiment's pairs, and PlanCache hits and misses. An auto plan ranks every candidate but leaves what ranking does
// not need (the losers' workspace and route, the price of those shown to cost more) to the first read of its
// candidates; BM_AutoPlanCandidates reads them (as plan JSON and the CLI do). Results: bench/results/*planning*.json,
// bench/results/*plan-cache.txt.
#include <benchmark/benchmark.h>

#include "reshard/plan_cache.hpp"
#include "reshard/planner.hpp"
#include "square_case.hpp"

namespace reshard {
namespace {

using Case = testing::SquareCase;
using testing::layouts;

const Case kCases[] = {
    {"S0,S1", "S1,S0", {2, 2}},
    {"S0,S0", "S1,S1", {2, 2}},
    {"S0,S1", "S1,S0", {4, 4}},
    {"S0,S0", "S1,S1", {4, 4}},
    {"S0,S1", "S1,S0", {8, 8}},
    {"S0,S0", "S1,S1", {8, 8}},
    {"S0,S1,R", "S1,S0,R", {8, 8, 16}},
    {"S0,S0,R", "S1,S1,R", {8, 8, 16}},
    {"S0,S1", "S1,S0", {16, 64}},
    {"S0,S0", "S1,S1", {16, 64}},
    // 16384 ranks (issue #15): a 65536x65536 tensor, so that every rank pair exchanges a 4x4 block.
    {"S0,S1", "S1,S0", {64, 256}, 65536},
    {"S0,S0", "S1,S1", {64, 256}, 65536},
};

void label(benchmark::State& state, const Case& c) {
  state.SetLabel(Mesh(c.mesh).str() + " [" + c.from + "]->[" + c.to + "]");
}

// Global plans of case state.range(0) under `options`.
void global_plans(benchmark::State& state, const PlanOptions& options) {
  const Case& c = kCases[state.range(0)];
  const auto [src, dst] = layouts(c);
  for (auto _ : state) benchmark::DoNotOptimize(make_plan(src, dst, DType::kBF16, options));
  label(state, c);
}

void BM_AutoPlan(benchmark::State& state) { global_plans(state, PlanOptions{}); }  // auto, 8 ranks per node

// An auto plan and its candidates read: every candidate's figures complete (Plan::candidates()).
void BM_AutoPlanCandidates(benchmark::State& state) {
  const Case& c = kCases[state.range(0)];
  const auto [src, dst] = layouts(c);
  for (auto _ : state) {
    const Plan plan = make_plan(src, dst, DType::kBF16);
    benchmark::DoNotOptimize(plan.candidates().data());
  }
  label(state, c);
}

// One strategy on one transport (range 1: 0 collective, 1 p2p nccl, 2 p2p nvlink, 3 hybrid nccl, 4 hybrid nvlink):
// where an auto plan's time goes.
// The mesh on one node, so that nvlink is available everywhere.
void BM_StrategyPlan(benchmark::State& state) {
  PlanOptions options;
  const int which = static_cast<int>(state.range(1));
  options.strategy = which == 0 ? Strategy::kCollective : which <= 2 ? Strategy::kP2P : Strategy::kHybrid;
  options.transport = which == 0 ? Transport::kAuto : which % 2 == 1 ? Transport::kNccl : Transport::kNvlink;
  options.topology.ranks_per_node = Mesh(kCases[state.range(0)].mesh).size();
  global_plans(state, options);
}

void BM_RankPlan(benchmark::State& state) {
  const Case& c = kCases[state.range(0)];
  const auto [src, dst] = layouts(c);
  PlanOptions options;
  int rank = src.mesh().size() / 2 + 1;
  for (auto _ : state)
    benchmark::DoNotOptimize(make_rank_plan(src, dst, DType::kBF16, rank % src.mesh().size(), options));
  label(state, c);
}

// A cache hit: the key of the request, one lookup, the shared plan returned (never planned again). `get` asks the
// cache for a global or a rank plan.
template <class Get>
void cache_hit(benchmark::State& state, Get get) {
  const Case& c = kCases[state.range(0)];
  const auto [src, dst] = layouts(c);
  PlanOptions options;
  PlanCache cache;
  get(cache, src, dst, options);
  for (auto _ : state) benchmark::DoNotOptimize(get(cache, src, dst, options));
  if (cache.stats().misses != 1) state.SkipWithError("a hit planned");
  label(state, c);
}

void BM_CacheHit(benchmark::State& state) {
  cache_hit(state, [](PlanCache& cache, const Layout& src, const Layout& dst, const PlanOptions& options) {
    return cache.get_or_plan(src, dst, DType::kBF16, options);
  });
}

void BM_CacheHitRank(benchmark::State& state) {
  cache_hit(state, [](PlanCache& cache, const Layout& src, const Layout& dst, const PlanOptions& options) {
    return cache.get_or_plan_rank(src, dst, DType::kBF16, (src.mesh().size() / 2 + 1) % src.mesh().size(), options);
  });
}

// A miss: the cache emptied, then the key, a full auto plan and the insertion (compare with BM_AutoPlan).
void BM_CacheMiss(benchmark::State& state) {
  const Case& c = kCases[state.range(0)];
  const auto [src, dst] = layouts(c);
  PlanOptions options;
  PlanCache cache;
  for (auto _ : state) {
    cache.clear();
    benchmark::DoNotOptimize(cache.get_or_plan(src, dst, DType::kBF16, options));
  }
  if (cache.stats().hits != 0) state.SkipWithError("a miss hit");
  label(state, c);
}

BENCHMARK(BM_AutoPlan)->DenseRange(0, 11)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AutoPlanCandidates)->DenseRange(0, 9)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_StrategyPlan)->ArgsProduct({{0, 3, 5}, {0, 1, 2, 3, 4}})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RankPlan)->DenseRange(0, 11)->Unit(benchmark::kMicrosecond);
// Cases 0 (2x2 [S0,S1]->[S1,S0]) and 9 (16x64 [S0,S0]->[S1,S1]).
BENCHMARK(BM_CacheHit)->Arg(0)->Arg(9)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_CacheHitRank)->Arg(0)->Arg(9)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_CacheMiss)->Arg(0)->Arg(9)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace reshard

BENCHMARK_MAIN();
