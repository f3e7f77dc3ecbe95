// Layout: a tensor of a global shape placed on a mesh, and the part each rank holds.
//
// Semantics are exactly PyTorch DTensor's (_compute_local_shape_and_global_offset): for every tensor dim d, a rank
// holds a list of global indices, initially all of them. For mesh dims 0, 1, ... in order:
//  - Shard(d) on a mesh dim of size n splits the current list of s indices into n chunks as torch.chunk does
//    (full = ceil(s / n); chunk i is positions [full * i, min(s, full * (i + 1))), empty past the end) and the
//    rank at coordinate i keeps chunk i;
//  - _StridedShard(d, f) first splits the list into f torch.chunk pieces, splits each piece into n chunks, and the
//    rank at coordinate i keeps chunk i of every piece, in piece order (FSDP2 + TP's right-to-left sharding);
//  - Replicate and Partial leave the lists alone.
// The rank's local shape is the length of each list and its global offset the first index (global_shape[d] for
// an empty list). Without _StridedShard every list is one range, so a rank's part is a box. With it a list may be
// several ranges: such a layout is reported (local_shard, ranges) but not planned (box() refuses it).
#pragma once

#include <array>
#include <span>
#include <string>
#include <vector>

#include "reshard/box.hpp"
#include "reshard/mesh.hpp"
#include "reshard/placement.hpp"

namespace reshard {

// A half-open range [begin, begin + size) of one tensor dim.
struct Interval {
  Index begin = 0;
  Index size = 0;
  Index end() const { return begin + size; }
};

// What PyTorch reports for a rank: local_shape and global_offset.
struct LocalShard {
  Dims shape;
  Dims offset;
};

class Layout {
 public:
  Layout() = default;
  // Validates and normalises: one placement per mesh dim, shard dims in [-ndim, ndim), non-negative
  // extents whose product fits in int64. kInvalidArgument naming the problem otherwise.
  Layout(Mesh mesh, std::vector<Placement> placements, Dims global_shape);

  const Mesh& mesh() const { return mesh_; }
  const std::vector<Placement>& placements() const { return placements_; }
  const Placement& placement(int mesh_dim) const { return placements_[mesh_dim]; }
  const Dims& global_shape() const { return global_shape_; }
  int ndim() const { return global_shape_.size(); }
  Index global_volume() const { return global_volume_; }

  // Whether every rank's part is one box (always without _StridedShard).
  bool one_box_per_rank() const { return one_box_; }
  // The local box of a rank (offset = PyTorch's global_offset, shape = local_shape). kInvalidArgument naming the
  // rank and the ranges when its part is not one box. A world rank outside the mesh holds nothing: empty_box(); a
  // rank outside the world is kInvalidArgument.
  Box box(int rank) const;
  // The box of a rank that holds nothing: shape 0 and offset global_shape on every dim.
  Box empty_box() const { return Box{global_shape_, Dims(ndim())}; }
  Box box_at(const Dims& coord) const;
  // PyTorch's local_shape and global_offset of a rank, for any layout (empty_box()'s for a rank outside the mesh).
  LocalShard local_shard(int rank) const;
  Index local_volume(int rank) const { return volume(box(rank)); }

  // The same tensor with other placements on the same mesh, or on another mesh.
  Layout with_placements(std::vector<Placement> placements) const;
  Layout on(Mesh mesh, std::vector<Placement> placements) const;

  // Mesh dims that shard tensor dim d, in order (the nesting order).
  std::span<const int> sharding_mesh_dims(int tensor_dim) const {
    return {sharding_[tensor_dim].dims.data(), static_cast<size_t>(sharding_[tensor_dim].count)};
  }
  // The range of tensor dim d held at a mesh coordinate (only the coordinates of sharding mesh dims matter).
  // The range of an empty shard has begin == global_shape[d]. kInvalidArgument when it is several ranges.
  Interval interval(int tensor_dim, const Dims& coord) const;
  // The indices of tensor dim d held at a mesh coordinate, as ascending disjoint non-adjacent ranges (none when
  // empty). One range unless a _StridedShard shards d.
  std::vector<Interval> ranges(int tensor_dim, const Dims& coord) const;
  bool has_partial() const;

  // "2x2 [S0,S1] 8x8" (the mesh as Mesh::str() prints it)
  std::string str() const;

  friend bool operator==(const Layout& a, const Layout& b) {
    return a.mesh_ == b.mesh_ && a.placements_ == b.placements_ && a.global_shape_ == b.global_shape_;
  }

 private:
  Mesh mesh_;
  std::vector<Placement> placements_;
  Dims global_shape_;
  Index global_volume_ = 0;
  // Per tensor dim, held inline (layouts are built in the planner's loops: no allocation beside the placements).
  struct ShardingDims {
    std::array<int, kMaxDims> dims{};
    int count = 0;
  };
  std::array<ShardingDims, kMaxDims> sharding_{};  // the mesh dims sharding each tensor dim
  unsigned strided_ = 0;                           // bit d: a _StridedShard shards tensor dim d
  bool strided(int d) const { return (strided_ >> d) & 1u; }
  bool one_box_ = true;
};

// Parses a tensor shape "7x5"; every extent a whole number >= 0; kParse error otherwise.
Dims parse_shape(std::string_view text);

}  // namespace reshard
