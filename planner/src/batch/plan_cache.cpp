#include "reshard/plan_cache.hpp"

#include <exception>
#include <functional>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>

#include "reshard/error.hpp"

namespace reshard {
namespace {

// The key is a compact byte string: fixed-size fields as their bytes, lists behind their length.
template <class T>
void put(std::string& key, T value) {
  static_assert(std::is_trivially_copyable_v<T>);
  key.append(reinterpret_cast<const char*>(&value), sizeof value);
}

void put_ints(std::string& key, const std::vector<int>& values) {
  put(key, static_cast<std::uint32_t>(values.size()));
  key.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int));
}

void put_mesh(std::string& key, const Mesh& mesh) {
  put_ints(key, mesh.shape());
  put_ints(key, mesh.explicit_ranks());  // empty when row-major over the whole world
  put(key, static_cast<std::int32_t>(mesh.world_size()));
}

// Placements as given (make_plan keeps them in the plan, so [S0] and [R] on a size-1 mesh dim are different keys).
void put_placements(std::string& key, const std::vector<Placement>& placements) {
  put(key, static_cast<std::uint32_t>(placements.size()));
  for (const Placement& p : placements) {
    put(key, static_cast<std::uint8_t>(p.kind()));
    put(key, static_cast<std::int32_t>(p.dim()));
    put(key, static_cast<std::int32_t>(p.split_factor()));
    put(key, static_cast<std::uint8_t>(p.op()));
  }
}

void put_shape(std::string& key, const Dims& shape) {
  put(key, static_cast<std::uint32_t>(shape.size()));
  for (Index x : shape) put(key, x);
}

template <class T>
void put_optional(std::string& key, const std::optional<T>& value) {
  put(key, static_cast<std::uint8_t>(value.has_value()));
  put(key, value.value_or(T{}));
}

std::string identity_of(const Profile& profile) {
  std::string text;
  try {
    text = profile_to_json(profile);
  } catch (const std::exception&) {
    // extra_json that is not a JSON object cannot be merged into the document: count it verbatim instead.
    Profile without_extra = profile;
    without_extra.extra_json.clear();
    text = profile_to_json(without_extra) + profile.extra_json;
  }
  std::string identity;
  put(identity, static_cast<std::uint32_t>(profile.name.size()));
  identity += profile.name;
  put(identity, static_cast<std::uint64_t>(std::hash<std::string>{}(text)));
  return identity;
}

}  // namespace

PlanCache::PlanCache(size_t capacity) : capacity_(capacity) {
  RESHARD_REQUIRE(capacity >= 1, "a plan cache must hold at least 1 plan, got a capacity of 0");
}

const std::string& PlanCache::profile_identity(const Profile& profile) {
  for (const KnownProfile& known : profiles_)
    if (known.profile == profile) return known.identity;
  if (profiles_.size() == kKnownProfiles) profiles_.erase(profiles_.begin());
  profiles_.push_back(KnownProfile{profile, identity_of(profile)});
  return profiles_.back().identity;
}

std::string PlanCache::key_of(const Layout& src, const Layout& dst, DType dtype, int rank, const PlanOptions& options) {
  // Every field of PlanOptions and Topology is named here: a new field breaks this binding (the number of names must
  // match the number of fields) until it is added to the key below.
  const auto& [strategy, transport, fusion, relay, topology, profile, memory_budget_bytes, max_collectives,
               pipeline_chunk_bytes, low_sm, buffers_change] = options;
  const auto& [ranks_per_node, peer_access] = topology;

  std::string key;
  key.reserve(128);
  put_mesh(key, src.mesh());
  // The layouts of most requests share their mesh; a different one (a plan between meshes) is keyed in full.
  const bool same_mesh = src.mesh() == dst.mesh();
  put(key, static_cast<std::uint8_t>(same_mesh));
  if (!same_mesh) put_mesh(key, dst.mesh());
  put_placements(key, src.placements());
  put_placements(key, dst.placements());
  put_shape(key, src.global_shape());
  put_shape(key, dst.global_shape());
  put(key, dtype);
  put(key, static_cast<std::int32_t>(rank));
  put(key, static_cast<std::int32_t>(strategy));
  put(key, static_cast<std::int32_t>(transport));
  put(key, static_cast<std::int32_t>(fusion));
  put(key, static_cast<std::int32_t>(relay));
  put(key, static_cast<std::int32_t>(ranks_per_node));
  put(key, static_cast<std::uint8_t>(peer_access));
  put_optional(key, memory_budget_bytes);
  put_optional(key, max_collectives);
  put(key, pipeline_chunk_bytes);
  put(key, static_cast<std::uint8_t>(low_sm));
  put(key, static_cast<std::uint8_t>(buffers_change));
  key += profile_identity(profile);
  return key;
}

PlanCache::Entry* PlanCache::find(const std::string& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return &*it->second;
}

const PlanCache::Entry& PlanCache::insert(Entry entry) {
  if (Entry* e = find(entry.key)) return *e;  // another thread planned it meanwhile: everyone shares the first
  lru_.push_front(std::move(entry));
  index_.emplace(lru_.front().key, lru_.begin());
  while (lru_.size() > capacity_) {
    index_.erase(lru_.back().key);
    lru_.pop_back();
    ++stats_.evictions;
  }
  return lru_.front();
}

std::shared_ptr<const Plan> PlanCache::get(const Layout& src, const Layout& dst, DType dtype, int rank,
                                           const PlanOptions& options) {
  std::string key;
  {
    std::lock_guard lock(mutex_);
    key = key_of(src, dst, dtype, rank, options);
    if (Entry* e = find(key)) {
      ++stats_.hits;
      return e->plan;
    }
    ++stats_.misses;
  }

  // Plan without the lock; an error propagates and nothing is inserted.
  auto plan = std::make_shared<const Plan>(rank < 0 ? make_plan(src, dst, dtype, options)
                                                    : make_rank_plan(src, dst, dtype, rank, options));

  std::lock_guard lock(mutex_);
  return insert(Entry{std::move(key), plan, nullptr}).plan;
}

std::shared_ptr<const PlanBatch> PlanCache::get_or_plan_batch(std::span<const BatchEntry> entries,
                                                              const PlanOptions& options) {
  std::string key;
  {
    std::lock_guard lock(mutex_);
    // A leading mesh rank count no mesh has: batch keys never equal a plan's.
    put(key, std::numeric_limits<std::uint32_t>::max());
    put(key, static_cast<std::uint64_t>(entries.size()));
    for (const BatchEntry& e : entries) {
      const std::string one = key_of(e.src, e.dst, e.dtype, -1, options);
      put(key, static_cast<std::uint32_t>(one.size()));
      key += one;
    }
    if (Entry* e = find(key)) {
      ++stats_.hits;
      return e->batch;
    }
    ++stats_.misses;
  }
  auto batch = std::make_shared<const PlanBatch>(make_plan_batch(entries, options));
  std::lock_guard lock(mutex_);
  return insert(Entry{std::move(key), nullptr, batch}).batch;
}

std::shared_ptr<const Plan> PlanCache::get_or_plan(const Layout& src, const Layout& dst, DType dtype,
                                                   const PlanOptions& options) {
  return get(src, dst, dtype, -1, options);
}

std::shared_ptr<const Plan> PlanCache::get_or_plan_rank(const Layout& src, const Layout& dst, DType dtype, int rank,
                                                        const PlanOptions& options) {
  // make_rank_plan refuses a rank outside the mesh; a negative one must not reach the global plan's key.
  RESHARD_REQUIRE(rank >= 0 && rank < src.mesh().world_size(), "rank ", rank, " is not in mesh ", src.mesh().str(),
                  " (ranks 0..", src.mesh().world_size() - 1, ")");
  return get(src, dst, dtype, rank, options);
}

size_t PlanCache::size() const {
  std::lock_guard lock(mutex_);
  return lru_.size();
}

void PlanCache::clear() {
  std::lock_guard lock(mutex_);
  index_.clear();
  lru_.clear();
}

PlanCacheStats PlanCache::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace reshard
