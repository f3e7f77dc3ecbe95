#include "reshard/box.hpp"

#include <algorithm>

namespace reshard {

Box whole(const Dims& shape) { return Box{Dims(shape.size(), 0), shape}; }

Index volume(const Box& b) {
  Index v = 1;
  for (int i = 0; i < b.ndim(); ++i) v *= b.shape[i];  // layouts guarantee the global volume fits in int64
  return v;
}

bool is_empty(const Box& b) {
  for (int i = 0; i < b.ndim(); ++i)
    if (b.shape[i] == 0) return true;
  return false;
}

Box intersect(const Box& a, const Box& b) {
  RESHARD_REQUIRE(a.ndim() == b.ndim(), "cannot intersect a ", a.ndim(), "-D box with a ", b.ndim(), "-D box");
  Box r{Dims(a.ndim()), Dims(a.ndim())};
  for (int i = 0; i < a.ndim(); ++i) {
    Index lo = std::max(a.offset[i], b.offset[i]);
    Index hi = std::min(a.offset[i] + a.shape[i], b.offset[i] + b.shape[i]);
    r.offset[i] = lo;
    r.shape[i] = std::max<Index>(0, hi - lo);
  }
  return r;
}

bool contains(const Box& outer, const Box& inner) {
  if (is_empty(inner)) return true;
  if (outer.ndim() != inner.ndim()) return false;
  for (int i = 0; i < inner.ndim(); ++i) {
    if (inner.offset[i] < outer.offset[i]) return false;
    if (inner.offset[i] + inner.shape[i] > outer.offset[i] + outer.shape[i]) return false;
  }
  return true;
}

Index local_offset(const Box& owner, const Box& inner) {
  Index off = 0;
  for (int i = 0; i < owner.ndim(); ++i) off = off * owner.shape[i] + (inner.offset[i] - owner.offset[i]);
  return off;
}

bool is_contiguous_in(const Box& owner, const Box& inner) {
  if (is_empty(inner)) return true;
  // Skip leading dims where the inner box has extent 1; the first dim with extent > 1 may be partial, every
  // later dim must be full.
  int i = 0;
  while (i < inner.ndim() && inner.shape[i] == 1) ++i;
  for (int j = i + 1; j < inner.ndim(); ++j)
    if (inner.shape[j] != owner.shape[j]) return false;
  return true;
}

std::string to_string(const Box& b) {
  std::string s = "[";
  for (int i = 0; i < b.ndim(); ++i) {
    if (i) s += ", ";
    s += std::to_string(b.offset[i]) + ":" + std::to_string(b.offset[i] + b.shape[i]);
  }
  s += "]";
  if (is_empty(b)) s += " (empty)";
  return s;
}

}  // namespace reshard
