#include "reshard/rank_boxes.hpp"

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

namespace reshard {
namespace {

// Storage of tables kept for reuse on this thread: at most kKept buffers and kKeptBytes in all, each at least
// kMinBytes (smaller ones come cheaply from the allocator's per-thread cache; a small mesh's box table, 144 bytes per
// rank, is beyond it and cost several hundred instructions to take from the shared bins and give back, per layout).
// take() returns the kept buffer with the smallest sufficient capacity (cleared), or an empty vector; give() keeps a
// buffer's storage, dropping the smallest kept one when full.
template <class T>
class BufferPool {
 public:
  std::vector<T> take(size_t n) {
    if (n * sizeof(T) < kMinBytes) return {};
    auto best = kept_.end();
    for (auto it = kept_.begin(); it != kept_.end(); ++it)
      if (it->capacity() >= n && (best == kept_.end() || it->capacity() < best->capacity())) best = it;
    if (best == kept_.end()) return {};
    std::vector<T> v = std::move(*best);
    kept_.erase(best);
    bytes_ -= v.capacity() * sizeof(T);
    return v;
  }
  void give(std::vector<T>&& v) {
    const size_t bytes = v.capacity() * sizeof(T);
    if (bytes < kMinBytes || bytes > kKeptBytes) return;
    while (!kept_.empty() && (kept_.size() >= kKept || bytes_ + bytes > kKeptBytes)) {
      auto smallest = std::min_element(kept_.begin(), kept_.end(),
                                       [](const auto& a, const auto& b) { return a.capacity() < b.capacity(); });
      bytes_ -= smallest->capacity() * sizeof(T);
      kept_.erase(smallest);
    }
    v.clear();
    kept_.push_back(std::move(v));
    bytes_ += bytes;
  }

 private:
  static constexpr size_t kKept = 16, kMinBytes = size_t{1} << 10, kKeptBytes = size_t{256} << 20;
  std::vector<std::vector<T>> kept_;
  size_t bytes_ = 0;
};

BufferPool<Box>& box_pool() {
  thread_local BufferPool<Box> pool;
  return pool;
}

BufferPool<Index>& volume_pool() {
  thread_local BufferPool<Index> pool;
  return pool;
}

}  // namespace

RankBoxes::~RankBoxes() {
  box_pool().give(std::move(boxes_));
  volume_pool().give(std::move(volumes_));
}

RankBoxes::RankBoxes(Layout moved) : layout_(std::move(moved)) {
  const Layout& layout = layout_;
  const Mesh& mesh = layout.mesh();
  const int n = mesh.size();
  const int nd = layout.ndim();
  const auto world = static_cast<size_t>(mesh.world_size());
  boxes_ = box_pool().take(world);
  volumes_ = volume_pool().take(world);
  boxes_.assign(world, layout.empty_box());  // world ranks outside the mesh hold nothing
  volumes_.assign(world, 0);
  any_empty_ = mesh.world_size() > n;
  Dims coord(mesh.ndim(), 0);
  max_volume_ = -1;
  // A layout of one box per rank on a small mesh: every tensor dim's intervals are computed once per coordinate of
  // the mesh dims sharding it (a table on the stack, row-major over them), not once per rank. Large meshes and other
  // layouts go through box_at (which names the rank whose part is not one box): no temporary allocation beside the
  // boxes themselves.
  constexpr size_t kTable = 256;
  struct Entry {  // an Interval without its default member initialisers (the table is not zeroed)
    Index begin, size;
  };
  Entry table[kTable];
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
      const std::span<const int> dims = layout.sharding_mesh_dims(d);
      Dims c(mesh.ndim(), 0);
      while (true) {
        const Interval x = layout.interval(d, c);
        table[at++] = Entry{x.begin, x.size};
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
        const Entry& iv = table[table_begin[d] + i];
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
