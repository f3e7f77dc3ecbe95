// PlanCache: a bounded, thread-safe, least-recently-used cache of plans, for runtimes that ask for the same
// redistribution again and again (every training step, every sweep run).
//
//   reshard::PlanCache cache;  // 256 plans
//   std::shared_ptr<const reshard::Plan> plan = cache.get_or_plan(src, dst, reshard::DType::kBF16, options);
//
// Contract:
//  - The key is everything a plan depends on: both layouts (mesh shape and explicit rank list, placements as
//    given, global shape), the dtype, every field of PlanOptions (strategy, transport, fusion, topology's ranks per
//    node and peer access, the profile, memory budget, max_collectives, pipeline_chunk_bytes, low_sm,
//    buffers_change) and the rank of a rank plan. The profile counts by its name and a 64-bit hash of
//    profile_to_json(profile), so two profiles of one name with different numbers are different keys. Adding a field
//    to PlanOptions or Topology breaks the build of plan_cache.cpp until the key covers it.
//  - A hit returns the cached plan itself (the same object, shared and immutable) and never plans. A miss calls
//    make_plan / make_rank_plan outside the cache's lock, so hits on other keys are not held up by a slow plan; two
//    threads missing on one key at once both plan, and both get the plan inserted first.
//  - Errors from the planner propagate unchanged and nothing is cached for the request.
//  - At most `capacity` plans are kept; inserting beyond it evicts the least recently used (a hit counts as use).
//    Evicted plans live on while a caller holds them.
//  - Every member may be called from any thread at the same time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "reshard/plan.hpp"
#include "reshard/plan_batch.hpp"
#include "reshard/planner.hpp"
#include "reshard/profile.hpp"

namespace reshard {

struct PlanCacheStats {
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;     // requests that planned (failed ones included)
  std::uint64_t evictions = 0;  // plans dropped to stay within the capacity
};

class PlanCache {
 public:
  static constexpr size_t kDefaultCapacity = 256;

  // kInvalidArgument when capacity is 0.
  explicit PlanCache(size_t capacity = kDefaultCapacity);
  PlanCache(const PlanCache&) = delete;
  PlanCache& operator=(const PlanCache&) = delete;

  // make_plan(src, dst, dtype, options), cached.
  std::shared_ptr<const Plan> get_or_plan(const Layout& src, const Layout& dst, DType dtype,
                                          const PlanOptions& options = {});
  // make_rank_plan(src, dst, dtype, rank, options), cached (a rank plan and the global plan are different keys).
  std::shared_ptr<const Plan> get_or_plan_rank(const Layout& src, const Layout& dst, DType dtype, int rank,
                                               const PlanOptions& options = {});

  // make_plan_batch(entries, options), cached under one key for the whole list (every entry's key, in order); a batch
  // counts as one entry of the capacity.
  std::shared_ptr<const PlanBatch> get_or_plan_batch(std::span<const BatchEntry> entries,
                                                     const PlanOptions& options = {});

  size_t capacity() const { return capacity_; }
  size_t size() const;
  // Drops every plan (statistics are kept).
  void clear();
  PlanCacheStats stats() const;

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<const Plan> plan;
    std::shared_ptr<const PlanBatch> batch;  // batch entries (plan unset)
  };
  // A profile seen before and its identity (name and hash of its JSON), so that a lookup compares profiles
  // instead of serialising one.
  struct KnownProfile {
    Profile profile;
    std::string identity;
  };
  static constexpr size_t kKnownProfiles = 8;

  std::shared_ptr<const Plan> get(const Layout& src, const Layout& dst, DType dtype, int rank,
                                  const PlanOptions& options);
  // Under the lock: the entry of `key` moved to the front (a hit), or null.
  Entry* find(const std::string& key);
  // Under the lock: inserts `entry` unless its key is there (returns the entry kept), evicting beyond the capacity.
  const Entry& insert(Entry entry);
  // Under the lock.
  std::string key_of(const Layout& src, const Layout& dst, DType dtype, int rank, const PlanOptions& options);
  const std::string& profile_identity(const Profile& profile);

  const size_t capacity_;
  mutable std::mutex mutex_;
  std::list<Entry> lru_;                                                    // most recently used first
  std::unordered_map<std::string_view, std::list<Entry>::iterator> index_;  // views of the entries' keys
  std::vector<KnownProfile> profiles_;                                      // most recently added last
  PlanCacheStats stats_;
};

}  // namespace reshard
