#include "reshard/rank_boxes.hpp"

#include <utility>
#include <vector>

namespace reshard {

RankBoxes::RankBoxes(Layout moved) : layout_(std::move(moved)) {
  const Layout& layout = layout_;
  const Mesh& mesh = layout.mesh();
  const int n = mesh.size();
  const int nd = layout.ndim();
  boxes_.assign(mesh.world_size(), layout.empty_box());  // world ranks outside the mesh hold nothing
  volumes_.assign(mesh.world_size(), 0);
  any_empty_ = mesh.world_size() > n;
  Dims coord(mesh.ndim(), 0);
  max_volume_ = -1;
  // A layout of one box per rank on a small mesh: every tensor dim's intervals are computed once per coordinate of
  // the mesh dims sharding it (a table on the stack, row-major over them), not once per rank. Large meshes and other
  // layouts go through box_at (which names the rank whose part is not one box): no temporary allocation beside the
  // boxes themselves.
  constexpr size_t kTable = 256;
  Interval table[kTable];
  Index table_begin[kMaxDims + 1] = {};
  bool tables = layout.one_box_per_rank();
  if (tables) {
    size_t entries = 0;
    for (int d = 0; d < nd; ++d) {
      size_t combos = 1;
      for (int k : layout.sharding_mesh_dims(d)) combos *= static_cast<size_t>(mesh.shape()[k]);
      entries += combos;
    }
    tables = entries <= kTable;
  }
  if (tables) {
    size_t at = 0;
    for (int d = 0; d < nd; ++d) {
      const std::vector<int>& dims = layout.sharding_mesh_dims(d);
      Dims c(mesh.ndim(), 0);
      while (true) {
        table[at++] = layout.interval(d, c);
        int j = static_cast<int>(dims.size()) - 1;
        while (j >= 0 && ++c[dims[j]] == mesh.shape()[dims[j]]) c[dims[j--]] = 0;
        if (j < 0) break;
      }
      table_begin[d + 1] = static_cast<Index>(at);
    }
  }
  Box proto{Dims(nd), Dims(nd)};  // filled per rank, then copied (no temporaries per rank)
  for (int pos = 0; pos < n; ++pos) {
    int rank = mesh.has_explicit_ranks() ? mesh.explicit_ranks()[pos] : pos;
    Box& b = boxes_[rank];
    if (tables) {
      for (int d = 0; d < nd; ++d) {
        Index i = 0;
        for (int k : layout.sharding_mesh_dims(d)) i = i * mesh.shape()[k] + coord[k];
        const Interval& iv = table[table_begin[d] + i];
        proto.offset[d] = iv.begin;
        proto.shape[d] = iv.size;
      }
      b = proto;
    } else {
      b = layout.box_at(coord);
    }
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
