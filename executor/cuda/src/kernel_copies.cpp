// Copies on SM kernels: a batch's regions cut into tiles, descriptors uploaded once, one launch per run.
#include <algorithm>

#include "copy_batches.hpp"
#include "device_bases.hpp"
#include "kernels.hpp"
#include "reshard/cuda_check.hpp"

namespace reshard::cuda {
namespace {

unsigned int alignment_of(long long x) {
  unsigned int a = 16;
  while (a > 1 && x % a != 0) a /= 2;
  return a;
}

}  // namespace

TileSet::TileSet(Device& device, int ordinal, const std::vector<CopyRegion>& regions, int es, long long tile_bytes,
                 int max_bases, int output_es)
    : bases_(max_bases) {
  // At most 1 GiB: the kernels index within a tile in 32 bits (copy_tile.cuh).
  RESHARD_REQUIRE(tile_bytes >= 16 && tile_bytes % 16 == 0 && tile_bytes <= (1LL << 30),
                  "copy tiles must be a positive multiple of 16 bytes, at most 1 GiB");
  std::vector<DeviceCopyRegion> rs;
  std::vector<DeviceCopyTile> tiles;
  for (const CopyRegion& r : regions) {
    const int nd = r.shape.size();
    RESHARD_REQUIRE(nd - 1 <= kMaxOuterDims, "copy region has too many dims");
    DeviceCopyRegion d;
    d.src_buffer = bases_.code(r.src);
    d.dst_buffer = bases_.code(r.dst);
    d.outer_dims = nd - 1;
    d.convert = output_es > 0 && r.dst.buffer == Buffer::kOutput ? 1 : 0;
    const int des = d.convert ? output_es : es;
    d.src_offset = r.src.offset * es;
    d.dst_offset = r.dst.offset * des;
    d.row_bytes = r.shape[nd - 1] * es;
    long long align_bits = d.src_offset | d.dst_offset | d.row_bytes;
    long long rows = 1;
    for (int k = 0; k < nd - 1; ++k) {
      d.outer_shape[k] = r.shape[k];
      d.src_stride[k] = r.src_strides[k] * es;
      d.dst_stride[k] = r.dst_strides[k] * des;
      align_bits |= d.src_stride[k] | d.dst_stride[k];
      rows *= r.shape[k];
    }
    d.align = alignment_of(align_bits == 0 ? 16 : align_bits);
    if (rows == 0 || d.row_bytes == 0) continue;
    const int index = static_cast<int>(rs.size());
    rs.push_back(d);
    if (d.row_bytes >= tile_bytes) {
      // Long rows: one row per tile, cut into tile_bytes pieces (16-byte multiples).
      for (long long row = 0; row < rows; ++row)
        for (long long c = 0; c < d.row_bytes; c += tile_bytes)
          tiles.push_back({index, row, row + 1, c, std::min(d.row_bytes, c + tile_bytes)});
    } else {
      long long per_tile = std::max(1LL, tile_bytes / d.row_bytes);
      for (long long row = 0; row < rows; row += per_tile)
        tiles.push_back({index, row, std::min(rows, row + per_tile), 0, d.row_bytes});
    }
  }
  tile_count_ = static_cast<int>(tiles.size());
  RESHARD_CUDA_CHECK(cudaSetDevice(ordinal));
  size_t region_bytes = rs.size() * sizeof(DeviceCopyRegion), table_bytes = tiles.size() * sizeof(DeviceCopyTile);
  memory_ = device.allocate(region_bytes + table_bytes + 16);
  auto* base = static_cast<char*>(memory_->data());
  regions_ = reinterpret_cast<DeviceCopyRegion*>(base);
  tiles_ = reinterpret_cast<DeviceCopyTile*>(base + region_bytes);
  if (region_bytes) RESHARD_CUDA_CHECK(cudaMemcpy(regions_, rs.data(), region_bytes, cudaMemcpyHostToDevice));
  if (table_bytes) RESHARD_CUDA_CHECK(cudaMemcpy(tiles_, tiles.data(), table_bytes, cudaMemcpyHostToDevice));
  // Uploads go through the legacy stream, which non-blocking streams do not wait for: finish them before any run.
  RESHARD_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
}

namespace {

class KernelCopyBatch : public CopyBatch {
 public:
  KernelCopyBatch(Device& device, int ordinal, const std::vector<CopyRegion>& regions, int es, int max_blocks)
      : tiles_(device, ordinal, regions, es, 64 * 1024, kMaxCopyBases), max_blocks_(max_blocks) {}

  void run(const BufferBases& b, StreamHandle stream) override {
    const auto s = static_cast<cudaStream_t>(stream);
    if (tiles_.bases().size() <= kMaxBases)
      RESHARD_CUDA_CHECK(launch_copies(tiles_.regions(), tiles_.tiles(), tiles_.tile_count(), max_blocks_,
                                       tiles_.bases().fill<DeviceBases>(b), s));
    else
      RESHARD_CUDA_CHECK(launch_copies(tiles_.regions(), tiles_.tiles(), tiles_.tile_count(), max_blocks_,
                                       tiles_.bases().fill<DeviceWideBases>(b), s));
  }

 private:
  TileSet tiles_;
  int max_blocks_;
};

// A converting batch: one launch of the (dtype, output dtype) pair's copy kernel.
class ConvertingCopyBatch : public CopyBatch {
 public:
  ConvertingCopyBatch(Device& device, int ordinal, const std::vector<CopyRegion>& regions, DType dtype,
                      DType output_dtype, int max_blocks)
      : tiles_(device, ordinal, regions, element_size(dtype), 64 * 1024, kMaxCopyBases, element_size(output_dtype)),
        dtype_(dtype),
        output_dtype_(output_dtype),
        max_blocks_(max_blocks) {
    RESHARD_CUDA_CHECK(load_converting_kernels(dtype, output_dtype));
  }

  void run(const BufferBases& b, StreamHandle stream) override {
    RESHARD_CUDA_CHECK(launch_converting_copies(
        dtype_, output_dtype_, tiles_.regions(), tiles_.tiles(), tiles_.tile_count(), max_blocks_,
        tiles_.bases().fill<DeviceWideBases>(b), static_cast<cudaStream_t>(stream)));
  }

 private:
  TileSet tiles_;
  DType dtype_, output_dtype_;
  int max_blocks_;
};

}  // namespace

std::unique_ptr<CopyBatch> make_converting_copies(Device& device, int ordinal, const std::vector<CopyRegion>& regions,
                                                  DType dtype, DType output_dtype, int max_blocks) {
  return std::make_unique<ConvertingCopyBatch>(device, ordinal, regions, dtype, output_dtype, max_blocks);
}

std::unique_ptr<CopyBatch> make_kernel_copies(Device& device, int ordinal, const std::vector<CopyRegion>& regions,
                                              int element_size, int max_blocks) {
  auto groups = split_by_bases(
      regions,
      [](const CopyRegion& r) {
        return std::vector<BufferRef>{r.src, r.dst};
      },
      kMaxCopyBases);
  if (groups.size() == 1) return std::make_unique<KernelCopyBatch>(device, ordinal, regions, element_size, max_blocks);
  std::vector<std::unique_ptr<CopyBatch>> parts;
  for (const auto& g : groups)
    parts.push_back(std::make_unique<KernelCopyBatch>(device, ordinal, g, element_size, max_blocks));
  return std::make_unique<SplitBatch>(std::move(parts));
}

}  // namespace reshard::cuda
