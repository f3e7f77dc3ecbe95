#include "reshard/mesh.hpp"

#include "reshard/text.hpp"

#include <algorithm>
#include <charconv>
#include <limits>

namespace reshard {
namespace {

std::string too_many_ranks() { return cat(" has more than ", kMaxRanks, " ranks, the most reshard supports (2^20)"); }

int checked_size(const std::vector<int>& shape) {
  RESHARD_REQUIRE(!shape.empty(), "a mesh needs at least one dim");
  RESHARD_REQUIRE(static_cast<int>(shape.size()) <= kMaxDims, "a mesh has at most ", kMaxDims, " dims, got ",
                  shape.size());
  Index total = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    RESHARD_REQUIRE(shape[i] >= 1, "mesh dim ", i, " must be >= 1, got ", shape[i]);
    total *= shape[i];  // each factor < 2^31 and we stop once past kMaxRanks, so this cannot overflow
    RESHARD_REQUIRE(total <= kMaxRanks, "mesh ", to_string(Dims::from(shape)), too_many_ranks());
  }
  return static_cast<int>(total);
}

}  // namespace

Mesh::Mesh(std::vector<int> shape) : shape_(std::move(shape)), size_(checked_size(shape_)) {}

Mesh::Mesh(std::vector<int> shape, std::vector<int> ranks) : Mesh(std::move(shape)) {
  RESHARD_REQUIRE(static_cast<int>(ranks.size()) == size_, "mesh ", str(), " has ", size_,
                  " positions but the rank list has ", ranks.size(), " entries");
  position_.assign(size_, -1);
  for (int i = 0; i < size_; ++i) {
    int r = ranks[i];
    RESHARD_REQUIRE(r >= 0 && r < size_, "rank list entry ", r, " is outside 0..", size_ - 1);
    RESHARD_REQUIRE(position_[r] < 0, "rank ", r, " appears twice in the rank list");
    position_[r] = i;
  }
  bool identity = true;
  for (int i = 0; i < size_; ++i) identity = identity && ranks[i] == i;
  if (identity) {
    position_.clear();
  } else {
    ranks_ = std::move(ranks);
  }
}

int Mesh::dim_size(int mesh_dim) const {
  RESHARD_REQUIRE(mesh_dim >= 0 && mesh_dim < ndim(), "mesh dim ", mesh_dim, " out of range for a ", ndim(), "-D mesh");
  return shape_[mesh_dim];
}

Dims Mesh::coord_of(int rank) const {
  RESHARD_REQUIRE(rank >= 0 && rank < size_, "rank ", rank, " is not in mesh ", str(), " (", size_, " ranks)");
  int linear = ranks_.empty() ? rank : position_[rank];
  Dims c(ndim());
  for (int i = ndim() - 1; i >= 0; --i) {
    c[i] = linear % shape_[i];
    linear /= shape_[i];
  }
  return c;
}

int Mesh::linear_index(const Dims& coord) const {
  RESHARD_REQUIRE(coord.size() == ndim(), "coordinate has ", coord.size(), " entries for a ", ndim(), "-D mesh");
  Index linear = 0;
  for (int i = 0; i < ndim(); ++i) {
    RESHARD_REQUIRE(coord[i] >= 0 && coord[i] < shape_[i], "coordinate ", coord[i], " out of range for mesh dim ", i);
    linear = linear * shape_[i] + coord[i];
  }
  return static_cast<int>(linear);
}

int Mesh::rank_at(const Dims& coord) const {
  int linear = linear_index(coord);
  return ranks_.empty() ? linear : ranks_[linear];
}

int Mesh::group_size(std::span<const int> mesh_dims) const {
  int n = 1;
  for (int d : mesh_dims) n *= dim_size(d);
  return n;
}

std::vector<int> Mesh::group(int rank, std::span<const int> mesh_dims) const {
  Dims coord = coord_of(rank);
  int n = group_size(mesh_dims);
  std::vector<int> out(n);
  for (int g = 0; g < n; ++g) {
    int rest = g;
    for (int j = static_cast<int>(mesh_dims.size()) - 1; j >= 0; --j) {
      int d = mesh_dims[j];
      coord[d] = rest % shape_[d];
      rest /= shape_[d];
    }
    out[g] = rank_at(coord);
  }
  return out;
}

int Mesh::group_index(int rank, std::span<const int> mesh_dims) const {
  Dims coord = coord_of(rank);
  int idx = 0;
  for (int d : mesh_dims) idx = idx * dim_size(d) + static_cast<int>(coord[d]);
  return idx;
}

std::string Mesh::str() const {
  std::string s;
  for (size_t i = 0; i < shape_.size(); ++i) {
    if (i) s += 'x';
    s += std::to_string(shape_[i]);
  }
  if (!ranks_.empty()) {
    s += '[';
    for (size_t i = 0; i < ranks_.size(); ++i) {
      if (i) s += ',';
      s += std::to_string(ranks_[i]);
    }
    s += ']';
  }
  return s;
}

std::vector<int> parse_mesh_shape(std::string_view text) {
  std::vector<int> shape;
  const std::string quoted = cat("mesh '", printable(text), "'");
  if (text.empty()) fail(ErrorKind::kParse, "mesh: empty value; expected dims like 2x4");
  std::vector<std::string_view> parts = split(text, 'x');
  if (static_cast<int>(parts.size()) > kMaxDims)
    fail(ErrorKind::kParse, cat(quoted, " has ", parts.size(), " dims; at most ", kMaxDims, " are supported"));
  Index total = 1;
  for (std::string_view part : parts) {
    const long long v = parse_integer_or_fail(part, cat(quoted, ": dim ", shape.size()));
    if (v < 1) fail(ErrorKind::kParse, cat(quoted, ": dim ", shape.size(), " is ", v, "; every dim must be >= 1"));
    if (v > kMaxRanks || (total *= v) > kMaxRanks) fail(ErrorKind::kParse, cat(quoted, too_many_ranks()));
    shape.push_back(static_cast<int>(v));
  }
  return shape;
}

}  // namespace reshard
