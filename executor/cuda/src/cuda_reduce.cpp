// Reductions on the GPU: a batch's descriptors cut into tiles and uploaded once (ReduceTileSet), and
// CudaDevice::prepare_reductions, one kernel launch per run.
#include <algorithm>

#include "device_bases.hpp"
#include "reduce_tiles.hpp"
#include "reshard/cuda_check.hpp"
#include "reshard/cuda_device.hpp"
#include "reshard/dtype_convert.hpp"

namespace reshard {
namespace cuda {

ReduceTileSet::ReduceTileSet(Device& device, const std::vector<ReduceRegion>& regions, DType dtype,
                             long long tile_elements, std::optional<DType> output_dtype)
    : as_(detail::reduce_as(dtype)) {
  const bool converting = output_dtype && *output_dtype != dtype;
  if (converting) require_convertible(dtype, *output_dtype);  // floating dtypes: one lane
  RESHARD_REQUIRE(tile_elements >= 1, "reduction tiles must hold at least one element");
  // complex64 runs as f32 pairs: every element offset and outer stride doubles, and so does the contiguous row.
  const long long lanes = as_.lanes;
  std::vector<DeviceReduceRegion> rs;
  std::vector<DeviceReduceSource> srcs;
  std::vector<DeviceReduceTile> tiles;
  for (const ReduceRegion& r : regions) {
    const int nd = r.shape.size();
    RESHARD_REQUIRE(nd <= kMaxReduceDims, "reduction region has ", nd, " dims; at most ", kMaxReduceDims);
    RESHARD_REQUIRE(r.srcs.size() == r.src_strides.size(), "reduction region: ", r.srcs.size(), " sources but ",
                    r.src_strides.size(), " stride sets");
    RESHARD_REQUIRE(nd >= 1 && r.dst_strides[nd - 1] == 1, "reduction region: the innermost dim must be contiguous");
    for (const Dims& st : r.src_strides)
      RESHARD_REQUIRE(st[nd - 1] == 1, "reduction region: the innermost dim must be contiguous in every source");
    require_reducible(dtype, r.op);
    const long long n = r.shape.product();
    if (n == 0) continue;
    DeviceReduceRegion d;
    d.dst_buffer = bases_.code(r.dst);
    d.ndim = nd;
    d.first_src = static_cast<int>(srcs.size());
    d.src_count = static_cast<int>(r.srcs.size());
    d.op = r.op;
    d.divisor = r.divisor;
    d.convert = converting && r.dst.buffer == Buffer::kOutput ? 1 : 0;
    RESHARD_REQUIRE(rs.empty() || d.convert == rs.front().convert,
                    "internal: a converting batch of reductions mixes regions into the output and elsewhere");
    converts_ = d.convert == 1;
    d.dst_offset = r.dst.offset * lanes;
    for (int k = 0; k < nd; ++k) {
      d.shape[k] = k == nd - 1 ? r.shape[k] * lanes : r.shape[k];
      d.dst_stride[k] = k == nd - 1 ? 1 : r.dst_strides[k] * lanes;
    }
    for (size_t j = 0; j < r.srcs.size(); ++j) {
      DeviceReduceSource s;
      s.buffer = bases_.code(r.srcs[j]);
      s.offset = r.srcs[j].offset * lanes;
      for (int k = 0; k < nd; ++k) s.stride[k] = k == nd - 1 ? 1 : r.src_strides[j][k] * lanes;
      srcs.push_back(s);
    }
    const int index = static_cast<int>(rs.size());
    rs.push_back(d);
    const long long row = r.shape[nd - 1] * lanes, rows = n / r.shape[nd - 1];
    if (row >= tile_elements) {
      for (long long i = 0; i < rows; ++i)
        for (long long c = 0; c < row; c += tile_elements)
          tiles.push_back({index, i, i + 1, c, std::min(row, c + tile_elements)});
    } else {
      const long long per_tile = std::max(1LL, tile_elements / row);
      for (long long i = 0; i < rows; i += per_tile) tiles.push_back({index, i, std::min(rows, i + per_tile), 0, row});
    }
  }
  tile_count_ = static_cast<int>(tiles.size());
  const size_t region_bytes = rs.size() * sizeof(DeviceReduceRegion),
               source_bytes = srcs.size() * sizeof(DeviceReduceSource),
               tile_bytes = tiles.size() * sizeof(DeviceReduceTile);
  memory_ = device.allocate(region_bytes + source_bytes + tile_bytes + 16);
  auto* base = static_cast<char*>(memory_->data());
  regions_ = reinterpret_cast<DeviceReduceRegion*>(base);
  sources_ = reinterpret_cast<DeviceReduceSource*>(base + region_bytes);
  tiles_ = reinterpret_cast<DeviceReduceTile*>(base + region_bytes + source_bytes);
  if (region_bytes) RESHARD_CUDA_CHECK(cudaMemcpy(regions_, rs.data(), region_bytes, cudaMemcpyHostToDevice));
  if (source_bytes) RESHARD_CUDA_CHECK(cudaMemcpy(sources_, srcs.data(), source_bytes, cudaMemcpyHostToDevice));
  if (tile_bytes) RESHARD_CUDA_CHECK(cudaMemcpy(tiles_, tiles.data(), tile_bytes, cudaMemcpyHostToDevice));
  // Uploads go through the legacy stream, which non-blocking streams do not wait for: finish them before any run.
  RESHARD_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
}

}  // namespace cuda

namespace {

// Converting (output_dtype != dtype): the pair's kernel, whose regions into an output buffer store converted.
class CudaReduceBatch : public CopyBatch {
 public:
  CudaReduceBatch(CudaDevice& device, const std::vector<ReduceRegion>& regions, DType dtype, DType output_dtype)
      : tiles_(device, regions, dtype, cuda::kReduceTileElements, output_dtype), output_dtype_(output_dtype) {
    if (converts()) RESHARD_CUDA_CHECK(cuda::load_converting_reductions(tiles_.kernel_dtype(), output_dtype_));
  }

  void run(const BufferBases& b, StreamHandle stream) override {
    const auto s = static_cast<cudaStream_t>(stream);
    if (converts())
      RESHARD_CUDA_CHECK(cuda::launch_converting_reductions(tiles_.kernel_dtype(), output_dtype_, tiles_.regions(),
                                                            tiles_.sources(), tiles_.tiles(), tiles_.tile_count(),
                                                            tiles_.bases().fill(b), s));
    else
      RESHARD_CUDA_CHECK(cuda::launch_reductions(tiles_.regions(), tiles_.sources(), tiles_.tiles(),
                                                 tiles_.tile_count(), tiles_.kernel_dtype(), tiles_.bases().fill(b),
                                                 s));
  }

 private:
  bool converts() const { return tiles_.converts(); }
  cuda::ReduceTileSet tiles_;
  DType output_dtype_;
};

}  // namespace

std::unique_ptr<CopyBatch> CudaDevice::prepare_reductions(const std::vector<ReduceRegion>& regions, DType dtype) {
  return prepare_reductions(regions, dtype, dtype);
}

std::unique_ptr<CopyBatch> CudaDevice::prepare_reductions(const std::vector<ReduceRegion>& regions, DType dtype,
                                                          DType output_dtype) {
  auto groups = cuda::split_by_bases(regions, [](const ReduceRegion& r) {
    std::vector<BufferRef> refs = r.srcs;
    refs.push_back(r.dst);
    return refs;
  });
  if (groups.size() == 1) return std::make_unique<CudaReduceBatch>(*this, regions, dtype, output_dtype);
  std::vector<std::unique_ptr<CopyBatch>> parts;
  for (const auto& g : groups) parts.push_back(std::make_unique<CudaReduceBatch>(*this, g, dtype, output_dtype));
  return std::make_unique<cuda::SplitBatch>(std::move(parts));
}

}  // namespace reshard
