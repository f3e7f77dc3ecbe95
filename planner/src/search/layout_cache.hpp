// Rank boxes and overlap indexes of the layouts one planning visits, built once per planning and shared by its
// searches (internal to the planner): on a 16k-rank mesh each costs a pass over every rank and megabytes.
#pragma once

#include <algorithm>
#include <array>
#include <compare>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "plan/transitions.hpp"
#include "pricing/step_pricing.hpp"
#include "reshard/overlap.hpp"
#include "reshard/rank_boxes.hpp"
#include "search/flat_map.hpp"

namespace reshard::detail {

// A compact, exact key of a placement list (every field of every placement), built without allocating.
struct PlacementsKey {
  std::array<std::uint64_t, 2 * kMaxDims> words{};  // per placement: (kind, op), (dim, split factor)
  int size = 0;

  friend bool operator==(const PlacementsKey&, const PlacementsKey&) = default;
  friend auto operator<=>(const PlacementsKey&, const PlacementsKey&) = default;
  std::size_t hash(std::size_t h = 1469598103934665603ull) const {
    for (int i = 0; i < 2 * size; ++i) h = (h ^ words[i]) * 1099511628211ull + (h >> 29);
    return h ^ static_cast<std::size_t>(size);
  }
};

inline PlacementsKey placements_key(const std::vector<Placement>& ps) {
  PlacementsKey key;
  key.size = static_cast<int>(ps.size());
  if (key.size > kMaxDims) fail(ErrorKind::kInternal, "a placement list longer than the mesh's dims");
  for (int i = 0; i < key.size; ++i) {
    const Placement& p = ps[i];
    key.words[2 * i] =
        static_cast<std::uint64_t>(static_cast<std::uint32_t>(p.kind())) << 32 | static_cast<std::uint32_t>(p.op());
    key.words[2 * i + 1] = static_cast<std::uint64_t>(static_cast<std::uint32_t>(p.dim())) << 32 |
                           static_cast<std::uint32_t>(p.split_factor());
  }
  return key;
}

struct PlacementsKeyHash {
  std::size_t operator()(const PlacementsKey& k) const { return k.hash(); }
};

// A pair of placement lists (a step's from and to).
struct PlacementsPair {
  PlacementsKey from, to;
  friend bool operator==(const PlacementsPair&, const PlacementsPair&) = default;
};

struct PlacementsPairHash {
  std::size_t operator()(const PlacementsPair& k) const { return k.to.hash(k.from.hash()); }
};

class LayoutCache {
 public:
  // Layouts are `base` (its mesh and shape) with other placements.
  LayoutCache(const Layout& base, const Topology& topology, int element_size)
      : base_(base), topology_(topology), element_size_(element_size) {}

  // Throws what RankBoxes throws (then nothing is cached).
  const RankBoxes& boxes(const std::vector<Placement>& placements) { return *shared_boxes(placements); }

  // Whether the collective step from -> to of `kind` on `dims` is valid (transition_valid) and its price; computed
  // once per planning and pipeline chunk (the hybrid search runs once per transport over the same steps).
  std::optional<StepPrice> collective_step(const std::vector<Placement>& from, const std::vector<Placement>& to,
                                           StepKind kind, const std::vector<int>& dims, const StepPricer& pricer) {
    const StepKey key = step_key(from, to, kind, dims, pricer);
    if (const std::optional<StepPrice>* known = steps_.find(key)) return *known;
    return priced(key, boxes(from), boxes(to), kind, dims, pricer);
  }
  // The same for a step between layouts whose boxes (from this cache) the caller holds.
  std::optional<StepPrice> collective_step(const RankBoxes& a, const RankBoxes& b, StepKind kind,
                                           const std::vector<int>& dims, const StepPricer& pricer) {
    return priced(step_key(a.layout().placements(), b.layout().placements(), kind, dims, pricer), a, b, kind, dims,
                  pricer);
  }

  // Every rank's scratch for the collective or local step from -> to of `kind` on `dims`; computed once per planning
  // and pipeline chunk (candidates share steps).
  const std::vector<Index>& collective_scratch(const std::vector<Placement>& from, const std::vector<Placement>& to,
                                               StepKind kind, const std::vector<int>& dims, const StepPricer& pricer) {
    const StepKey key = step_key(from, to, kind, dims, pricer);
    return scratch_.get_or(key, [&] { return pricer.collective_scratch(boxes(from), boxes(to), kind, dims); });
  }

  const OverlapIndex& overlap(const std::vector<Placement>& from, const std::vector<Placement>& to) {
    const PlacementsPair key{placements_key(from), placements_key(to)};
    return overlaps_.get_or(
        key, [&] { return OverlapIndex(shared_boxes(from), shared_boxes(to), topology_, element_size_); });
  }

 private:
  // A collective step: its placements, kind, mesh dims and the pricer's pipeline chunk.
  struct StepKey {
    PlacementsPair placements;
    int kind = 0, ndims = 0;
    std::array<int, kMaxDims> dims{};
    Index chunk = 0;
    friend bool operator==(const StepKey&, const StepKey&) = default;
  };
  struct StepKeyHash {
    std::size_t operator()(const StepKey& k) const {
      std::size_t h = PlacementsPairHash()(k.placements);
      h = (h ^ static_cast<std::size_t>(k.kind * 31 + k.ndims)) * 1099511628211ull;
      for (int i = 0; i < k.ndims; ++i) h = (h ^ static_cast<std::size_t>(k.dims[i])) * 1099511628211ull;
      return h ^ static_cast<std::size_t>(k.chunk);
    }
  };

  std::optional<StepPrice> priced(const StepKey& key, const RankBoxes& a, const RankBoxes& b, StepKind kind,
                                  const std::vector<int>& dims, const StepPricer& pricer) {
    return steps_.get_or(key, [&] {
      std::optional<StepPrice> price;
      if (transition_valid(a, b, kind, dims)) price = pricer.collective(a, b, kind, dims);
      return price;
    });
  }

  static StepKey step_key(const std::vector<Placement>& from, const std::vector<Placement>& to, StepKind kind,
                          const std::vector<int>& dims, const StepPricer& pricer) {
    StepKey key{{placements_key(from), placements_key(to)},
                static_cast<int>(kind),
                static_cast<int>(dims.size()),
                {},
                pricer.chunk_bytes()};
    if (key.ndims > kMaxDims) fail(ErrorKind::kInternal, "a step on more mesh dims than the mesh has");
    std::copy(dims.begin(), dims.end(), key.dims.begin());
    return key;
  }

  std::shared_ptr<const RankBoxes> shared_boxes(const std::vector<Placement>& placements) {
    return boxes_.get_or(placements_key(placements),
                         [&] { return std::make_shared<const RankBoxes>(base_.with_placements(placements)); });
  }

  Layout base_;
  Topology topology_;
  int element_size_;
  FlatMap<PlacementsKey, std::shared_ptr<const RankBoxes>, PlacementsKeyHash> boxes_;
  FlatMap<PlacementsPair, OverlapIndex, PlacementsPairHash> overlaps_;
  FlatMap<StepKey, std::optional<StepPrice>, StepKeyHash> steps_;
  FlatMap<StepKey, std::vector<Index>, StepKeyHash> scratch_;
};

}  // namespace reshard::detail
