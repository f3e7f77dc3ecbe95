// Rank boxes and overlap indexes of the layouts one planning visits, built once per planning and shared by its
// searches (internal to the planner): on a 16k-rank mesh each costs a pass over every rank and megabytes.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "reshard/overlap.hpp"
#include "reshard/rank_boxes.hpp"
#include "step_pricing.hpp"
#include "transitions.hpp"

namespace reshard::detail {

// A compact, exact key of a placement list (every field of every placement), built without formatting text.
inline std::string placements_key(const std::vector<Placement>& ps) {
  std::string key;
  key.reserve(ps.size() * 4 * sizeof(int));
  for (const Placement& p : ps) {
    const int fields[4] = {static_cast<int>(p.kind()), p.dim(), p.split_factor(), static_cast<int>(p.op())};
    key.append(reinterpret_cast<const char*>(fields), sizeof(fields));
  }
  return key;
}

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
    std::string key = placements_key(from) + placements_key(to);
    const int head[2] = {static_cast<int>(kind), static_cast<int>(dims.size())};
    key.append(reinterpret_cast<const char*>(head), sizeof(head));
    key.append(reinterpret_cast<const char*>(dims.data()), dims.size() * sizeof(int));
    const Index chunk = pricer.chunk_bytes();
    key.append(reinterpret_cast<const char*>(&chunk), sizeof(chunk));
    auto it = steps_.find(key);
    if (it != steps_.end()) return it->second;
    const RankBoxes &a = boxes(from), &b = boxes(to);
    std::optional<StepPrice> price;
    if (transition_valid(a, b, kind, dims)) price = pricer.collective(a, b, kind, dims);
    steps_.emplace(std::move(key), price);
    return price;
  }

  const OverlapIndex& overlap(const std::vector<Placement>& from, const std::vector<Placement>& to) {
    auto key = std::make_pair(placements_key(from), placements_key(to));
    auto it = overlaps_.find(key);
    if (it == overlaps_.end())
      it = overlaps_
               .emplace(std::move(key), OverlapIndex(shared_boxes(from), shared_boxes(to), topology_, element_size_))
               .first;
    return it->second;
  }

 private:
  std::shared_ptr<const RankBoxes> shared_boxes(const std::vector<Placement>& placements) {
    std::string key = placements_key(placements);
    auto it = boxes_.find(key);
    if (it == boxes_.end())
      it = boxes_.emplace(std::move(key), std::make_shared<const RankBoxes>(base_.with_placements(placements))).first;
    return it->second;
  }

  Layout base_;
  Topology topology_;
  int element_size_;
  std::map<std::string, std::shared_ptr<const RankBoxes>> boxes_;
  std::map<std::pair<std::string, std::string>, OverlapIndex> overlaps_;
  std::map<std::string, std::optional<StepPrice>> steps_;
};

}  // namespace reshard::detail
