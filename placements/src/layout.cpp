#include "reshard/layout.hpp"

#include "reshard/text.hpp"

namespace reshard {
namespace {
constexpr Index kMaxExtent = Index(1) << 62;  // keeps chunk arithmetic (full * (i + 1)) inside int64
}  // namespace

Layout::Layout(Mesh mesh, std::vector<Placement> placements, Dims global_shape)
    : mesh_(std::move(mesh)), placements_(std::move(placements)), global_shape_(global_shape) {
  RESHARD_REQUIRE(static_cast<int>(placements_.size()) == mesh_.ndim(), placements_.size(), " placements given for a ",
                  mesh_.ndim(), "-D mesh ", mesh_.str(), "; expected one per mesh dim");
  for (int d = 0; d < global_shape_.size(); ++d)
    RESHARD_REQUIRE(global_shape_[d] >= 0, "tensor dim ", d, " has negative extent ", global_shape_[d]);
  for (int d = 0; d < global_shape_.size(); ++d)
    RESHARD_REQUIRE(global_shape_[d] <= kMaxExtent, "tensor dim ", d, " has extent ", global_shape_[d],
                    " (at most 2^62)");
  global_volume_ = global_shape_.product("tensor shape " + to_string(global_shape_));
  sharding_.assign(global_shape_.size(), {});
  for (int k = 0; k < mesh_.ndim(); ++k) {
    placements_[k] = normalize(placements_[k], global_shape_.size());
    if (placements_[k].is_shard()) sharding_[placements_[k].dim()].push_back(k);
  }
}

Layout Layout::with_placements(std::vector<Placement> placements) const {
  return Layout(mesh_, std::move(placements), global_shape_);
}

Interval Layout::interval(int d, const Dims& coord) const {
  Index begin = 0, size = global_shape_[d];
  for (int k : sharding_[d]) {
    Index n = mesh_.shape()[k];
    Index full = ceil_div(size, n);
    Index start = full * coord[k];
    Index chunk = start >= size ? 0 : std::min(size, full * (coord[k] + 1)) - start;
    if (chunk == 0) return Interval{global_shape_[d], 0};
    begin += start;
    size = chunk;
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

std::vector<int> Layout::partial_mesh_dims() const {
  std::vector<int> dims;
  for (int k = 0; k < mesh_.ndim(); ++k)
    if (placements_[k].is_partial()) dims.push_back(k);
  return dims;
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
