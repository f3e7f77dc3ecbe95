#include "reshard/rank_boxes.hpp"

namespace reshard {

RankBoxes::RankBoxes(const Layout& layout) : layout_(layout) {
  const Mesh& mesh = layout.mesh();
  const int n = mesh.size();
  boxes_.assign(mesh.world_size(), layout.empty_box());  // world ranks outside the mesh hold nothing
  volumes_.assign(mesh.world_size(), 0);
  any_empty_ = mesh.world_size() > n;
  Dims coord(mesh.ndim(), 0);
  max_volume_ = -1;
  for (int pos = 0; pos < n; ++pos) {
    int rank = mesh.has_explicit_ranks() ? mesh.explicit_ranks()[pos] : pos;
    Box& b = boxes_[rank];
    b = layout.box_at(coord);
    Index v = reshard::volume(b);
    volumes_[rank] = v;
    // Replicated layouts hold the tensor once per rank: the sum can pass int64 where one box does not.
    if (!try_add(total_volume_, v, total_volume_))
      fail(ErrorKind::kInvalidArgument,
           cat("layout ", layout.str(), " holds more elements over its ", n, " ranks than fit in 64 bits"));
    any_empty_ = any_empty_ || v == 0;
    for (int k = mesh.ndim() - 1; k >= 0; --k) {
      if (++coord[k] < mesh.shape()[k]) break;
      coord[k] = 0;
    }
  }
  for (int r = 0; r < size(); ++r) {
    if (volumes_[r] > max_volume_) {
      max_volume_ = volumes_[r];
      max_rank_ = r;
    }
  }
}

}  // namespace reshard
