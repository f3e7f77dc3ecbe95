// RankBoxes: every world rank's box of a layout (empty outside its mesh), computed once (O(ranks x dims)) for code
// that visits many ranks. size() is the world size.
#pragma once

#include <vector>

#include "reshard/layout.hpp"

namespace reshard {

class RankBoxes {
 public:
  explicit RankBoxes(Layout layout);  // a temporary layout is moved in, not copied
  // The tables' storage (not their contents) goes back to a bounded per-thread pool that the next RankBoxes of this
  // thread draws from: a 16k-rank plan builds about ten 2.25 MiB tables, and handing them back to the system after
  // every plan made the next plan fault all of them in again.
  ~RankBoxes();
  RankBoxes(const RankBoxes&) = default;
  RankBoxes(RankBoxes&&) = default;
  RankBoxes& operator=(const RankBoxes&) = default;
  RankBoxes& operator=(RankBoxes&&) = default;

  const Layout& layout() const { return layout_; }
  int size() const { return static_cast<int>(boxes_.size()); }
  const Box& operator[](int rank) const { return boxes_[rank]; }
  Index volume(int rank) const { return volumes_[rank]; }
  Index max_volume() const { return max_volume_; }
  int max_volume_rank() const { return max_rank_; }  // the lowest rank holding max_volume()
  Index total_volume() const { return total_volume_; }
  bool any_empty() const { return any_empty_; }

 private:
  Layout layout_;
  std::vector<Box> boxes_;
  std::vector<Index> volumes_;
  Index max_volume_ = 0, total_volume_ = 0;
  int max_rank_ = 0;
  bool any_empty_ = false;
};

}  // namespace reshard
