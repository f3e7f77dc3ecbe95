// PlanCache: hits return the cached plan itself, every key field separates plans, LRU eviction, errors are not
// cached, and concurrent use from 8 threads.
#include "reshard/plan_cache.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "reshard/error.hpp"
#include "reshard/plan_json.hpp"
#include "reshard/planner.hpp"

namespace reshard {
namespace {

// One planning request.
struct Request {
  Layout src, dst;
  DType dtype = DType::kBF16;
  int rank = -1;  // -1: the global plan
  PlanOptions options;
};

Request base_request() {
  Layout src(Mesh({2, 2}), parse_placements("S0,S1"), Dims{64, 64});
  return Request{src, src.with_placements(parse_placements("S1,S0")), DType::kBF16, -1, {}};
}

std::shared_ptr<const Plan> cached(PlanCache& cache, const Request& r) {
  return r.rank < 0 ? cache.get_or_plan(r.src, r.dst, r.dtype, r.options)
                    : cache.get_or_plan_rank(r.src, r.dst, r.dtype, r.rank, r.options);
}

Plan planned(const Request& r) {
  return r.rank < 0 ? make_plan(r.src, r.dst, r.dtype, r.options)
                    : make_rank_plan(r.src, r.dst, r.dtype, r.rank, r.options);
}

Request with_layouts(Request r, const Mesh& mesh, const char* from, const char* to, Dims shape) {
  r.src = Layout(mesh, parse_placements(from), shape);
  r.dst = Layout(mesh, parse_placements(to), shape);
  return r;
}

// The base request with one key field changed, for every field of the key.
std::vector<std::pair<std::string, Request>> one_field_changed() {
  const Request b = base_request();
  std::vector<std::pair<std::string, Request>> out;
  auto add = [&](std::string name, const std::function<void(Request&)>& change) {
    Request r = b;
    change(r);
    out.emplace_back(std::move(name), std::move(r));
  };
  add("mesh shape", [](Request& r) { r = with_layouts(r, Mesh({4, 1}), "S0,S1", "S1,S0", Dims{64, 64}); });
  add("mesh ranks", [](Request& r) { r = with_layouts(r, Mesh({2, 2}, {3, 2, 1, 0}), "S0,S1", "S1,S0", {64, 64}); });
  add("src placements", [](Request& r) { r.src = r.src.with_placements(parse_placements("S0,R")); });
  add("dst placements", [](Request& r) { r.dst = r.dst.with_placements(parse_placements("R,S0")); });
  add("global shape", [](Request& r) { r = with_layouts(r, Mesh({2, 2}), "S0,S1", "S1,S0", Dims{64, 32}); });
  add("dtype", [](Request& r) { r.dtype = DType::kF32; });
  add("rank 0", [](Request& r) { r.rank = 0; });
  add("rank 3", [](Request& r) { r.rank = 3; });
  add("strategy", [](Request& r) { r.options.strategy = Strategy::kCollective; });
  add("transport", [](Request& r) { r.options.transport = Transport::kNccl; });
  add("fusion", [](Request& r) { r.options.fusion = Fusion::kNever; });
  add("ranks per node", [](Request& r) { r.options.topology.ranks_per_node = 2; });
  add("peer access", [](Request& r) { r.options.topology.peer_access = false; });
  add("profile name", [](Request& r) { r.options.profile.name = "other"; });
  add("profile numbers, same name", [](Request& r) { r.options.profile.intra_node.p2p.bandwidth_GBps *= 2; });
  add("profile samples, same name", [](Request& r) {
    r.options.profile.intra_node.all_to_all.samples = {{1024, 10}, {1 << 20, 40}};
  });
  add("memory budget", [](Request& r) { r.options.memory_budget_bytes = Index(1) << 30; });
  add("memory budget value", [](Request& r) { r.options.memory_budget_bytes = Index(1) << 31; });
  add("max collectives", [](Request& r) { r.options.max_collectives = 3; });
  add("pipeline chunk", [](Request& r) { r.options.pipeline_chunk_bytes = 4096; });
  add("low sm", [](Request& r) { r.options.low_sm = true; });
  return out;
}

TEST(PlanCache, HitReturnsTheSamePlanWithoutPlanning) {
  PlanCache cache;
  const Request r = base_request();
  auto first = cached(cache, r);
  auto second = cached(cache, r);
  EXPECT_EQ(first.get(), second.get());
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.stats().hits, 1u);
  EXPECT_EQ(cache.stats().misses, 1u);
  EXPECT_EQ(cache.stats().evictions, 0u);
  // An equal request built from fresh objects hits too.
  Request copy = base_request();
  copy.options.profile = default_profile();
  EXPECT_EQ(cached(cache, copy).get(), first.get());
}

TEST(PlanCache, CachedPlanEqualsThePlanners) {
  PlanCache cache;
  Request global = base_request();
  Request rank = base_request();
  rank.rank = 2;
  for (const Request& r : {global, rank}) {
    auto plan = cached(cache, r);
    EXPECT_EQ(plan_to_json(*plan), plan_to_json(planned(r)));
    EXPECT_EQ(plan_to_json(*cached(cache, r)), plan_to_json(planned(r)));
  }
  EXPECT_EQ(cache.stats().misses, 2u);
  EXPECT_EQ(cache.stats().hits, 2u);
}

TEST(PlanCache, EveryKeyFieldSeparatesPlans) {
  PlanCache cache(64);
  const auto base = cached(cache, base_request());
  std::vector<std::shared_ptr<const Plan>> seen{base};
  for (const auto& [field, r] : one_field_changed()) {
    SCOPED_TRACE(field);
    const PlanCacheStats before = cache.stats();
    auto plan = cached(cache, r);
    EXPECT_EQ(cache.stats().misses, before.misses + 1) << "a changed " << field << " must not hit";
    for (const auto& other : seen) EXPECT_NE(plan.get(), other.get());
    EXPECT_EQ(plan_to_json(*plan), plan_to_json(planned(r)));
    EXPECT_EQ(cached(cache, r).get(), plan.get());  // and the changed request is cached under its own key
    EXPECT_EQ(cache.stats().hits, before.hits + 1);
    seen.push_back(plan);
  }
  EXPECT_EQ(cache.size(), seen.size());
  EXPECT_EQ(cached(cache, base_request()).get(), base.get());
}

TEST(PlanCache, EvictsTheLeastRecentlyUsed) {
  PlanCache cache(3);
  auto request = [](DType dtype) {
    Request r = base_request();
    r.dtype = dtype;
    return r;
  };
  auto a = cached(cache, request(DType::kF32));
  auto b = cached(cache, request(DType::kF16));
  auto c = cached(cache, request(DType::kI32));
  EXPECT_EQ(cached(cache, request(DType::kF32)).get(), a.get());  // order now a, c, b
  auto d = cached(cache, request(DType::kI8));                    // evicts b
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.stats().evictions, 1u);
  EXPECT_EQ(cached(cache, request(DType::kF32)).get(), a.get());
  EXPECT_EQ(cached(cache, request(DType::kI32)).get(), c.get());
  EXPECT_EQ(cached(cache, request(DType::kI8)).get(), d.get());
  const PlanCacheStats before = cache.stats();
  auto b2 = cached(cache, request(DType::kF16));  // planned again; evicts a (least recent of a, c, d)
  EXPECT_NE(b2.get(), b.get());
  EXPECT_EQ(b->dtype(), DType::kF16);  // an evicted plan lives on while held
  EXPECT_EQ(cache.stats().misses, before.misses + 1);
  EXPECT_EQ(cache.stats().evictions, 2u);
  EXPECT_EQ(cached(cache, request(DType::kI32)).get(), c.get());
  EXPECT_NE(cached(cache, request(DType::kF32)).get(), a.get());

  cache.clear();
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_NE(cached(cache, request(DType::kI32)).get(), c.get());
}

TEST(PlanCache, FailedRequestsAreNotCached) {
  PlanCache cache;
  Request bad = base_request();
  bad.dst = Layout(Mesh({4, 1}, {4, 5, 6, 7}, 8), parse_placements("S1,S0"), Dims{64, 64});  // another world
  for (int i = 0; i < 2; ++i) {
    try {
      cached(cache, bad);
      ADD_FAILURE() << "layouts in worlds of different sizes must be refused";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    }
  }
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.stats().misses, 2u);  // planned (and failed) both times

  Request no_rank = base_request();
  no_rank.rank = 4;
  EXPECT_THROW(cached(cache, no_rank), Error);
  no_rank.rank = -1;
  EXPECT_THROW(cache.get_or_plan_rank(no_rank.src, no_rank.dst, no_rank.dtype, -1), Error);
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_THROW(PlanCache(0), Error);
}

TEST(PlanCache, ConcurrentUseFromEightThreads) {
  // More keys than capacity, so threads hit, miss and evict at once.
  const std::vector<DType> dtypes = {DType::kF32, DType::kF16, DType::kBF16, DType::kI32, DType::kI8, DType::kF64};
  std::vector<std::string> expected;
  for (DType dtype : dtypes) {
    Request r = base_request();
    r.dtype = dtype;
    expected.push_back(plan_to_json(planned(r)));
  }
  PlanCache cache(4);
  constexpr int kThreads = 8, kRequests = 120;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRequests; ++i) {
        const size_t k = (t + i / 10 + (i % 4 == 0 ? 3 : 0)) % dtypes.size();
        Request r = base_request();
        r.dtype = dtypes[k];
        auto plan = cached(cache, r);
        if (plan->dtype() != dtypes[k] || !(plan->src() == r.src) || !(plan->dst() == r.dst)) ++wrong;
        if (i % 40 == 0 && plan_to_json(*plan) != expected[k]) ++wrong;
        if (t == 0 && i == kRequests / 2) cache.clear();
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  const PlanCacheStats s = cache.stats();
  EXPECT_EQ(s.hits + s.misses, static_cast<std::uint64_t>(kThreads * kRequests));
  EXPECT_LE(cache.size(), 4u);
  EXPECT_GT(s.hits, 0u);
}

}  // namespace
}  // namespace reshard
