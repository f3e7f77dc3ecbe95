#include "reshard/layout.hpp"

#include "reshard/text.hpp"

#include <algorithm>

namespace reshard {
namespace {
constexpr Index kMaxExtent = Index(1) << 62;  // keeps chunk arithmetic (full * (i + 1)) inside int64
// _StridedShard bounds: ranges in one rank's index list, pieces one split makes, and mesh coordinates the one-box
// check visits per tensor dim. Far above what FSDP2 + TP layouts need; a hostile layout fails with a clear error.
constexpr Index kMaxRanges = Index(1) << 16;
constexpr Index kMaxPieces = Index(1) << 20;
constexpr Index kMaxStridedCoords = Index(1) << 20;

// torch.chunk's chunk i of s elements in n chunks: [start, start + size), size 0 past the end.
Interval chunk_of(Index s, Index n, Index i) {
  const Index full = ceil_div(s, n);
  const Index start = full * i;
  if (start >= s) return Interval{s, 0};
  return Interval{start, std::min(s, start + full) - start};
}

// An index list as ascending ranges, with the positions where each range starts (for selecting by position).
class IndexList {
 public:
  explicit IndexList(Index extent) : size_(extent) {
    if (extent > 0) {
      ranges_.push_back(Interval{0, extent});
      starts_.push_back(0);
    }
  }
  Index size() const { return size_; }
  const std::vector<Interval>& ranges() const { return ranges_; }

  // The list's positions [pos.begin, pos.end()) appended to `out`.
  void select(const Interval& pos, IndexList& out, const Layout& where) const {
    if (pos.size == 0) return;
    size_t r = std::upper_bound(starts_.begin(), starts_.end(), pos.begin) - starts_.begin() - 1;
    Index at = pos.begin - starts_[r], left = pos.size;
    for (; left > 0; ++r, at = 0) {
      const Index take = std::min(ranges_[r].size - at, left);
      out.append(Interval{ranges_[r].begin + at, take}, where);
      left -= take;
    }
  }

  void append(const Interval& iv, const Layout& where) {
    if (!ranges_.empty() && ranges_.back().end() == iv.begin) {
      ranges_.back().size += iv.size;
    } else {
      RESHARD_REQUIRE(static_cast<Index>(ranges_.size()) < kMaxRanges, "layout ", where.str(),
                      " splits a rank's indices into more than ", kMaxRanges, " ranges");
      ranges_.push_back(iv);
      starts_.push_back(size_);
    }
    size_ += iv.size;
  }

  static IndexList empty() { return IndexList(0); }

 private:
  std::vector<Interval> ranges_;
  std::vector<Index> starts_;  // position of each range's first index in the list
  Index size_ = 0;
};

}  // namespace

Layout::Layout(Mesh mesh, std::vector<Placement> placements, Dims global_shape)
    : mesh_(std::move(mesh)), placements_(std::move(placements)), global_shape_(global_shape) {
  RESHARD_REQUIRE(global_shape_.size() > 0 || mesh_.world_size() == mesh_.size(), "a 0-dim tensor on mesh ",
                  mesh_.str(),
                  ", a subset of the world, is not supported (a rank outside it would hold one element); "
                  "give it shape 1");
  RESHARD_REQUIRE(static_cast<int>(placements_.size()) == mesh_.ndim(), placements_.size(), " placements given for a ",
                  mesh_.ndim(), "-D mesh ", mesh_.str(), "; expected one per mesh dim");
  for (int d = 0; d < global_shape_.size(); ++d)
    RESHARD_REQUIRE(global_shape_[d] >= 0, "tensor dim ", d, " has negative extent ", global_shape_[d]);
  for (int d = 0; d < global_shape_.size(); ++d)
    RESHARD_REQUIRE(global_shape_[d] <= kMaxExtent, "tensor dim ", d, " has extent ", global_shape_[d],
                    " (at most 2^62)");
  global_volume_ = 1;  // the message is built only when the product overflows (layouts are built in planner loops)
  for (int d = 0; d < global_shape_.size(); ++d)
    if (!try_mul(global_volume_, global_shape_[d], global_volume_))
      global_volume_ = global_shape_.product("tensor shape " + to_string(global_shape_));
  sharding_ = {};
  strided_ = 0;
  for (int k = 0; k < mesh_.ndim(); ++k) {
    RESHARD_REQUIRE(placements_[k].split_factor() >= 1, "placement ", to_string(placements_[k]), " on mesh dim ", k,
                    ": the split factor must be >= 1");
    placements_[k] = normalize(placements_[k], global_shape_.size());
    if (!placements_[k].is_shard()) continue;
    ShardingDims& s = sharding_[placements_[k].dim()];
    s.dims[s.count++] = k;
    if (placements_[k].is_strided() && mesh_.dim_size(k) > 1) strided_ |= 1u << placements_[k].dim();
  }
  // With _StridedShard, a rank's indices of a tensor dim may be several ranges: check every coordinate once.
  for (int d = 0; d < ndim() && one_box_; ++d) {
    if (!strided(d)) continue;
    const std::span<const int> dims = sharding_mesh_dims(d);
    Index coords = 1;
    for (int k : dims) {
      coords *= mesh_.dim_size(k);
      RESHARD_REQUIRE(coords <= kMaxStridedCoords, "layout ", str(),
                      ": a _StridedShard tensor dim is sharded over more than ", kMaxStridedCoords,
                      " mesh coordinates");
    }
    Dims coord(mesh_.ndim(), 0);
    for (Index c = 0; c < coords && one_box_; ++c) {
      Index rest = c;
      for (int j = static_cast<int>(dims.size()) - 1; j >= 0; --j) {
        coord[dims[j]] = rest % mesh_.dim_size(dims[j]);
        rest /= mesh_.dim_size(dims[j]);
      }
      one_box_ = ranges(d, coord).size() <= 1;
    }
  }
}

Layout Layout::with_placements(std::vector<Placement> placements) const {
  return Layout(mesh_, std::move(placements), global_shape_);
}

Layout Layout::on(Mesh mesh, std::vector<Placement> placements) const {
  return Layout(std::move(mesh), std::move(placements), global_shape_);
}

std::vector<Interval> Layout::ranges(int d, const Dims& coord) const {
  if (!strided(d)) {
    const Interval iv = interval(d, coord);
    return iv.size ? std::vector<Interval>{iv} : std::vector<Interval>{};
  }
  IndexList list(global_shape_[d]);
  for (int k : sharding_mesh_dims(d)) {
    const Index n = mesh_.shape()[k];
    if (n == 1) continue;  // one chunk, or one chunk of every piece: the whole list
    const Placement& p = placements_[k];
    const Index s = list.size();
    IndexList next = IndexList::empty();
    if (!p.is_strided()) {
      list.select(chunk_of(s, n, coord[k]), next, *this);
    } else {
      const Index f = p.split_factor();
      const Index pieces = s == 0 ? 0 : std::min(f, ceil_div(s, ceil_div(s, f)));  // the non-empty ones
      RESHARD_REQUIRE(pieces <= kMaxPieces, "layout ", str(), ": ", to_string(p), " splits an extent of ", s,
                      " into more than ", kMaxPieces, " pieces");
      for (Index j = 0; j < pieces; ++j) {
        const Interval piece = chunk_of(s, f, j);
        const Interval part = chunk_of(piece.size, n, coord[k]);
        list.select(Interval{piece.begin + part.begin, part.size}, next, *this);
      }
    }
    list = std::move(next);
    if (list.size() == 0) break;
  }
  return list.ranges();
}

Interval Layout::interval(int d, const Dims& coord) const {
  if (strided(d)) {
    const std::vector<Interval> rs = ranges(d, coord);
    if (rs.empty()) return Interval{global_shape_[d], 0};
    if (rs.size() > 1) {
      std::string list;
      for (size_t i = 0; i < rs.size() && i < 4; ++i)
        list += cat(i ? ", " : "", "[", rs[i].begin, ":", rs[i].end(), ")");
      if (rs.size() > 4) list += ", ...";
      fail(ErrorKind::kInvalidArgument,
           cat("layout ", str(), ": the rank at mesh coordinate (", to_string(coord, ','), ") holds ", rs.size(),
               " separate ranges of tensor dim ", d, " (", list,
               "), not one box; reshard plans _StridedShard layouts only where every rank's part is one box, as "
               "FSDP2 + TP's (_StridedShard(d, split_factor=n), Shard(d)) on evenly divisible extents"));
    }
    return rs.front();
  }
  Index begin = 0, size = global_shape_[d];
  for (int k : sharding_mesh_dims(d)) {
    const Interval c = chunk_of(size, mesh_.shape()[k], coord[k]);
    if (c.size == 0) return Interval{global_shape_[d], 0};
    begin += c.begin;
    size = c.size;
  }
  return Interval{begin, size};
}

Box Layout::box_at(const Dims& coord) const {
  Box b{Dims(ndim()), Dims(ndim())};
  for (int d = 0; d < ndim(); ++d) {
    Interval iv = interval(d, coord);
    b.offset[d] = iv.begin;
    b.shape[d] = iv.size;
  }
  return b;
}

Box Layout::box(int rank) const {
  if (mesh_.contains(rank)) return box_at(mesh_.coord_of(rank));
  RESHARD_REQUIRE(rank >= 0 && rank < mesh_.world_size(), "rank ", rank, " is not in mesh ", mesh_.str(), " (ranks 0..",
                  mesh_.world_size() - 1, ")");
  return empty_box();
}

LocalShard Layout::local_shard(int rank) const {
  if (!mesh_.contains(rank)) {
    RESHARD_REQUIRE(rank >= 0 && rank < mesh_.world_size(), "rank ", rank, " is not in mesh ", mesh_.str(),
                    " (ranks 0..", mesh_.world_size() - 1, ")");
    return LocalShard{Dims(ndim()), global_shape_};
  }
  const Dims coord = mesh_.coord_of(rank);
  LocalShard s{Dims(ndim()), Dims(ndim())};
  for (int d = 0; d < ndim(); ++d) {
    const std::vector<Interval> rs = ranges(d, coord);
    for (const Interval& iv : rs) s.shape[d] += iv.size;
    s.offset[d] = rs.empty() ? global_shape_[d] : rs.front().begin;
  }
  return s;
}

bool Layout::has_partial() const {
  for (const Placement& p : placements_)
    if (p.is_partial()) return true;
  return false;
}

std::string Layout::str() const {
  return mesh_.str() + " [" + to_string(placements_) + "] " + (ndim() ? to_string(global_shape_) : "scalar");
}

Dims parse_shape(std::string_view text) {
  if (text.empty()) fail(ErrorKind::kParse, "shape: empty value; expected extents like 1024x512");
  const std::string quoted = cat("shape '", printable(text), "'");
  Dims shape;
  for (std::string_view part : split(text, 'x')) {
    if (shape.size() == kMaxDims) fail(ErrorKind::kParse, cat(quoted, " has more than ", kMaxDims, " dims"));
    const long long v = parse_integer_or_fail(part, cat(quoted, ": extent ", shape.size()));
    if (v < 0) fail(ErrorKind::kParse, cat(quoted, ": extent ", v, " is negative"));
    shape.push_back(v);
  }
  Index total = 1;
  for (Index v : shape)
    if (!try_mul(total, v, total)) fail(ErrorKind::kParse, cat(quoted, " has more elements than fit in 64 bits"));
  return shape;
}

}  // namespace reshard
