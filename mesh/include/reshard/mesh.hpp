// Mesh: an N-D grid of ranks, as torch.distributed.DeviceMesh.
//
// Ranks are ranks of a world communicator of world_size() ranks. By default the mesh spans the whole world
// (world_size() == size()) and rank r sits at the row-major coordinate of r; an explicit rank list (distinct
// ranks in 0 .. world_size-1, listed in row-major coordinate order) places them otherwise, and a mesh given a
// world larger than itself sits on a subset of the world (ranks outside it hold nothing of a layout on it). The
// group of a rank along a set of mesh dims is the ranks that share all its other coordinates, ordered row-major
// over the chosen dims.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "reshard/dims.hpp"

namespace reshard {

// The most ranks a mesh may have: 2^20 (1,048,576). Planning holds a few boxes per rank per layout (about 150 bytes
// each), so this bounds what one plan can allocate; larger meshes are refused with a message naming the limit.
inline constexpr int kMaxRanks = 1 << 20;

class Mesh {
 public:
  Mesh() = default;
  // Row-major mesh. Every dim must be >= 1; at most kMaxDims dims and kMaxRanks ranks in all.
  explicit Mesh(std::vector<int> shape);
  // Mesh with an explicit rank at each row-major coordinate; `ranks` must be a permutation of 0..size-1.
  Mesh(std::vector<int> shape, std::vector<int> ranks);
  // Mesh on a subset of a world of `world_size` ranks (size() <= world_size <= kMaxRanks): `ranks` are distinct,
  // in 0..world_size-1, one per row-major coordinate.
  Mesh(std::vector<int> shape, std::vector<int> ranks, int world_size);

  int ndim() const { return static_cast<int>(shape_.size()); }
  int size() const { return size_; }
  // Ranks of the world communicator the mesh sits in (size() unless the mesh is on a subset of it).
  int world_size() const { return world_size_; }
  // Whether a world rank is one of the mesh's.
  bool contains(int rank) const {
    if (rank < 0 || rank >= world_size_) return false;
    return position_.empty() || position_[rank] >= 0;
  }
  // The rank at every row-major coordinate (0..size-1 for a row-major mesh).
  std::vector<int> ranks() const;
  int dim_size(int mesh_dim) const {
    if (mesh_dim < 0 || mesh_dim >= ndim()) dim_error(mesh_dim);
    return shape_[mesh_dim];
  }
  const std::vector<int>& shape() const { return shape_; }
  bool has_explicit_ranks() const { return !ranks_.empty(); }
  const std::vector<int>& explicit_ranks() const { return ranks_; }

  // Coordinate of a rank; kInvalidArgument if the rank is not in the mesh.
  // Inline: the planner's inner loops ask it per rank.
  Dims coord_of(int rank) const {
    if (!contains(rank)) rank_error(rank);
    int linear = ranks_.empty() ? rank : position_[rank];
    Dims c(ndim());
    for (int i = ndim() - 1; i >= 0; --i) {
      c[i] = linear % shape_[i];
      linear /= shape_[i];
    }
    return c;
  }
  // Rank at a coordinate (each entry within its dim).
  int rank_at(const Dims& coord) const;

  // Ranks that share all coordinates of `rank` except those on `mesh_dims`, row-major over `mesh_dims`
  // (in the order given). The rank's own position in the result is its group index.
  std::vector<int> group(int rank, std::span<const int> mesh_dims) const;
  std::vector<int> group(int rank, int mesh_dim) const { return group(rank, std::span<const int>(&mesh_dim, 1)); }
  // Position of `rank` inside group(rank, mesh_dims).
  int group_index(int rank, std::span<const int> mesh_dims) const;
  // Number of ranks in any group over `mesh_dims`.
  int group_size(std::span<const int> mesh_dims) const;

  // The canonical text form, which parse_mesh reads back: the shape "2x3"; then the rank list when it is not
  // 0..size-1 in order, "2x2[3,2,1,0]"; then "/W" when the world is larger than the mesh, "2x2[4,5,6,7]/8".
  std::string str() const;

  friend bool operator==(const Mesh& a, const Mesh& b) {
    return a.shape_ == b.shape_ && a.ranks_ == b.ranks_ && a.world_size_ == b.world_size_;
  }

 private:
  [[noreturn]] void dim_error(int mesh_dim) const;
  [[noreturn]] void rank_error(int rank) const;
  int linear_index(const Dims& coord) const;
  std::vector<int> shape_;
  std::vector<int> ranks_;     // empty: row-major over the whole world
  std::vector<int> position_;  // inverse of ranks_ over the world (-1: not in the mesh), empty when row-major
  int size_ = 1;
  int world_size_ = 1;
};

// Parses "AxBxC" into mesh dims (each >= 1, at most kMaxRanks in all); kParse error naming the text otherwise.
std::vector<int> parse_mesh_shape(std::string_view text);

// Parses a rank list: comma-separated ranks and inclusive ranges, "0-3,6,7" (at most kMaxRanks entries, each in
// 0..kMaxRanks-1); kParse error naming the text otherwise. Duplicates are left for Mesh to refuse.
std::vector<int> parse_rank_list(std::string_view text);

// Parses Mesh::str()'s form ("2x4", "2x2[3,2,1,0]", "2x2[4,5,6,7]/8"); kParse or kInvalidArgument naming the
// problem otherwise.
Mesh parse_mesh(std::string_view text);

}  // namespace reshard
