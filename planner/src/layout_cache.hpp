// Rank boxes and overlap indexes of the layouts one planning visits, built once per planning and shared by its
// searches (internal to the planner): on a 16k-rank mesh each costs a pass over every rank and megabytes.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "reshard/overlap.hpp"
#include "reshard/rank_boxes.hpp"

namespace reshard::detail {

class LayoutCache {
 public:
  // Layouts are `base` (its mesh and shape) with other placements.
  LayoutCache(const Layout& base, const Topology& topology, int element_size)
      : base_(base), topology_(topology), element_size_(element_size) {}

  // Throws what RankBoxes throws (then nothing is cached).
  const RankBoxes& boxes(const std::vector<Placement>& placements) {
    std::string key = to_string(placements);
    auto it = boxes_.find(key);
    if (it == boxes_.end()) it = boxes_.emplace(std::move(key), RankBoxes(base_.with_placements(placements))).first;
    return it->second;
  }

  const OverlapIndex& overlap(const std::vector<Placement>& from, const std::vector<Placement>& to) {
    auto key = std::make_pair(to_string(from), to_string(to));
    auto it = overlaps_.find(key);
    if (it == overlaps_.end())
      it = overlaps_
               .emplace(std::move(key),
                        OverlapIndex(base_.with_placements(from), base_.with_placements(to), topology_, element_size_))
               .first;
    return it->second;
  }

 private:
  Layout base_;
  Topology topology_;
  int element_size_;
  std::map<std::string, RankBoxes> boxes_;
  std::map<std::pair<std::string, std::string>, OverlapIndex> overlaps_;
};

}  // namespace reshard::detail
