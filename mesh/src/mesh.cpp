#include "reshard/mesh.hpp"

#include "reshard/text.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <optional>

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

Mesh::Mesh(std::vector<int> shape) : shape_(std::move(shape)), size_(checked_size(shape_)), world_size_(size_) {}

Mesh::Mesh(std::vector<int> shape, std::vector<int> ranks) : Mesh(shape, std::move(ranks), checked_size(shape)) {}

Mesh::Mesh(std::vector<int> shape, std::vector<int> ranks, int world_size) : Mesh(std::move(shape)) {
  RESHARD_REQUIRE(static_cast<int>(ranks.size()) == size_, "mesh ", str(), " has ", size_,
                  " positions but the rank list has ", ranks.size(), " entries");
  RESHARD_REQUIRE(world_size >= size_ && world_size <= kMaxRanks, "mesh ", str(), " of ", size_,
                  " ranks needs a world size in ", size_, "..", kMaxRanks, ", got ", world_size);
  world_size_ = world_size;
  position_.assign(world_size_, -1);
  for (int i = 0; i < size_; ++i) {
    int r = ranks[i];
    RESHARD_REQUIRE(r >= 0 && r < world_size_, "rank list entry ", r, " is outside 0..", world_size_ - 1,
                    world_size_ == size_ ? "" : " (the world's ranks)");
    RESHARD_REQUIRE(position_[r] < 0, "rank ", r, " appears twice in the rank list");
    position_[r] = i;
  }
  bool identity = world_size_ == size_;
  for (int i = 0; i < size_ && identity; ++i) identity = ranks[i] == i;
  if (identity) {
    position_.clear();
  } else {
    ranks_ = std::move(ranks);
  }
}

std::vector<int> Mesh::ranks() const {
  if (!ranks_.empty()) return ranks_;
  std::vector<int> out(size_);
  for (int i = 0; i < size_; ++i) out[i] = i;
  return out;
}

void Mesh::dim_error(int mesh_dim) const {
  fail(ErrorKind::kInvalidArgument, cat("mesh dim ", mesh_dim, " out of range for a ", ndim(), "-D mesh"));
}

void Mesh::rank_error(int rank) const {
  fail(ErrorKind::kInvalidArgument, cat("rank ", rank, " is not in mesh ", str(), " (", size_, " ranks)"));
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
  if (world_size_ != size_) s += cat('/', world_size_);
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

std::vector<int> parse_rank_list(std::string_view text) {
  const std::string quoted = cat("rank list '", printable(text), "'");
  if (text.empty()) fail(ErrorKind::kParse, "rank list: empty value; expected ranks like 0-3,6,7");
  std::vector<int> ranks;
  auto rank = [&](std::string_view part) {
    const long long v = parse_integer_or_fail(part, quoted);
    if (v < 0 || v >= kMaxRanks) fail(ErrorKind::kParse, cat(quoted, ": rank ", v, " is outside 0..", kMaxRanks - 1));
    return static_cast<int>(v);
  };
  for (std::string_view part : split(text, ',')) {
    const size_t dash = part.find('-', 1);  // a leading '-' is a (refused) negative number
    const int first = rank(part.substr(0, dash));
    const int last = dash == std::string_view::npos ? first : rank(part.substr(dash + 1));
    if (last < first) fail(ErrorKind::kParse, cat(quoted, ": range ", first, "-", last, " runs backwards"));
    if (static_cast<long long>(ranks.size()) + (last - first) + 1 > kMaxRanks)
      fail(ErrorKind::kParse, cat(quoted, " has more than ", kMaxRanks, " entries"));
    for (int r = first; r <= last; ++r) ranks.push_back(r);
  }
  return ranks;
}

Mesh parse_mesh(std::string_view text) {
  const std::string quoted = cat("mesh '", printable(text), "'");
  std::string_view rest = text;
  std::optional<int> world;
  if (size_t slash = rest.find('/'); slash != std::string_view::npos) {
    const long long w = parse_integer_or_fail(rest.substr(slash + 1), cat(quoted, ": world size"));
    if (w < 1 || w > kMaxRanks) fail(ErrorKind::kParse, cat(quoted, ": world size ", w, " is outside 1..", kMaxRanks));
    world = static_cast<int>(w);
    rest = rest.substr(0, slash);
  }
  std::optional<std::vector<int>> ranks;
  if (size_t open = rest.find('['); open != std::string_view::npos) {
    if (rest.back() != ']') fail(ErrorKind::kParse, cat(quoted, ": the rank list must end with ']'"));
    ranks = parse_rank_list(rest.substr(open + 1, rest.size() - open - 2));
    rest = rest.substr(0, open);
  }
  std::vector<int> shape = parse_mesh_shape(rest);
  if (!ranks && !world) return Mesh(std::move(shape));
  if (!ranks) {
    const int n = checked_size(shape);
    ranks.emplace(n);
    for (int i = 0; i < n; ++i) (*ranks)[i] = i;
  }
  const int n = static_cast<int>(ranks->size());
  return Mesh(std::move(shape), std::move(*ranks), world.value_or(n));
}

}  // namespace reshard
