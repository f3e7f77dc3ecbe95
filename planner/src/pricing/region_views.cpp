#include "pricing/region_views.hpp"

namespace reshard::detail {
namespace {

// Merges adjacent dims that are contiguous in every view and drops extent-1 dims; the innermost dim ends up with
// stride 1 in every view (a run of one element when needed), so kernels move rows.
void simplify_views(Dims& shape, std::vector<Dims*> strides) {
  Dims out_shape;
  std::vector<Dims> out(strides.size());
  for (int i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    if (out_shape.size() > 0) {
      const int j = out_shape.size() - 1;
      bool merge = true;
      for (size_t v = 0; v < strides.size(); ++v) merge = merge && out[v][j] == (*strides[v])[i] * shape[i];
      if (merge) {
        out_shape[j] *= shape[i];
        for (size_t v = 0; v < strides.size(); ++v) out[v][j] = (*strides[v])[i];
        continue;
      }
    }
    out_shape.push_back(shape[i]);
    for (size_t v = 0; v < strides.size(); ++v) out[v].push_back((*strides[v])[i]);
  }
  bool unit = out_shape.size() > 0;
  for (size_t v = 0; v < strides.size() && unit; ++v) unit = out[v][out_shape.size() - 1] == 1;
  if (!unit) {
    out_shape.push_back(1);
    for (Dims& o : out) o.push_back(1);
  }
  shape = out_shape;
  for (size_t v = 0; v < strides.size(); ++v) *strides[v] = out[v];
}

}  // namespace

CopyRegion box_copy(BufferRef src, const Box& from, BufferRef dst, const Box& to, const Box& region) {
  src.offset += local_offset(from, region);
  dst.offset += local_offset(to, region);
  CopyRegion r{src, dst, region.shape, row_major_strides(from.shape), row_major_strides(to.shape)};
  simplify_views(r.shape, {&r.src_strides, &r.dst_strides});
  return r;
}

ReduceRegion box_reduce(const std::vector<std::pair<BufferRef, Box>>& srcs, BufferRef dst, const Box& to,
                        const Box& region, ReduceOp op, Index divisor) {
  ReduceRegion r;
  r.shape = region.shape;
  r.dst = BufferRef{dst.buffer, dst.offset + local_offset(to, region), dst.peer};
  r.dst_strides = row_major_strides(to.shape);
  for (const auto& [ref, from] : srcs) {
    r.srcs.push_back(BufferRef{ref.buffer, ref.offset + local_offset(from, region), ref.peer});
    r.src_strides.push_back(row_major_strides(from.shape));
  }
  r.op = op;
  r.divisor = divisor;
  std::vector<Dims*> views{&r.dst_strides};
  for (Dims& d : r.src_strides) views.push_back(&d);
  simplify_views(r.shape, views);
  return r;
}

}  // namespace reshard::detail
