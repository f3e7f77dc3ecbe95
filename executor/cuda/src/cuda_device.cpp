#include "reshard/cuda_device.hpp"

#include <algorithm>

#include "device_bases.hpp"
#include "kernels.hpp"
#include "reshard/cuda_check.hpp"

namespace reshard {

namespace detail {

void throw_cuda(cudaError_t err, const char* call, const char* file, int line) {
  fail(ErrorKind::kBackend,
       cat(file, ":", line, ": ", call, " failed: ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")"));
}

}  // namespace detail

namespace {

constexpr long long kTileBytes = 64 * 1024;

class CudaMemory : public DeviceMemory {
 public:
  CudaMemory(int device, size_t bytes) : bytes_(bytes) {
    RESHARD_CUDA_CHECK(cudaSetDevice(device));
    if (bytes) RESHARD_CUDA_CHECK(cudaMalloc(&data_, bytes));
  }
  ~CudaMemory() override {
    if (data_) cudaFree(data_);  // destructors never throw; a failure here leaves nothing to recover
  }
  void* data() override { return data_; }
  size_t bytes() const override { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_;
};

unsigned int alignment_of(long long x) {
  unsigned int a = 16;
  while (a > 1 && x % a != 0) a /= 2;
  return a;
}

class CudaCopyBatch : public CopyBatch {
 public:
  CudaCopyBatch(int device, const std::vector<CopyRegion>& regions, int es, int max_blocks) : max_blocks_(max_blocks) {
    std::vector<cuda::DeviceCopyRegion> rs;
    std::vector<cuda::DeviceCopyTile> tiles;
    for (const CopyRegion& r : regions) {
      const int nd = r.shape.size();
      RESHARD_REQUIRE(nd - 1 <= cuda::kMaxOuterDims, "copy region has too many dims");
      cuda::DeviceCopyRegion d;
      d.src_buffer = static_cast<int>(r.src.buffer);
      d.dst_buffer = static_cast<int>(r.dst.buffer);
      d.outer_dims = nd - 1;
      d.src_offset = r.src.offset * es;
      d.dst_offset = r.dst.offset * es;
      d.row_bytes = r.shape[nd - 1] * es;
      long long align_bits = d.src_offset | d.dst_offset | d.row_bytes;
      long long rows = 1;
      for (int k = 0; k < nd - 1; ++k) {
        d.outer_shape[k] = r.shape[k];
        d.src_stride[k] = r.src_strides[k] * es;
        d.dst_stride[k] = r.dst_strides[k] * es;
        align_bits |= d.src_stride[k] | d.dst_stride[k];
        rows *= r.shape[k];
      }
      d.align = alignment_of(align_bits == 0 ? 16 : align_bits);
      if (rows == 0 || d.row_bytes == 0) continue;
      const int index = static_cast<int>(rs.size());
      rs.push_back(d);
      if (d.row_bytes >= kTileBytes) {
        // Long rows: one row per tile, cut into 64 KiB pieces (16-byte multiples).
        for (long long row = 0; row < rows; ++row)
          for (long long c = 0; c < d.row_bytes; c += kTileBytes)
            tiles.push_back({index, row, row + 1, c, std::min(d.row_bytes, c + kTileBytes)});
      } else {
        long long per_tile = std::max(1LL, kTileBytes / d.row_bytes);
        for (long long row = 0; row < rows; row += per_tile)
          tiles.push_back({index, row, std::min(rows, row + per_tile), 0, d.row_bytes});
      }
    }
    tile_count_ = static_cast<int>(tiles.size());
    RESHARD_CUDA_CHECK(cudaSetDevice(device));
    size_t region_bytes = rs.size() * sizeof(cuda::DeviceCopyRegion),
           tile_bytes = tiles.size() * sizeof(cuda::DeviceCopyTile);
    memory_ = std::make_unique<CudaMemory>(device, region_bytes + tile_bytes + 16);
    auto* base = static_cast<char*>(memory_->data());
    regions_ = reinterpret_cast<cuda::DeviceCopyRegion*>(base);
    tiles_ = reinterpret_cast<cuda::DeviceCopyTile*>(base + region_bytes);
    if (region_bytes) RESHARD_CUDA_CHECK(cudaMemcpy(regions_, rs.data(), region_bytes, cudaMemcpyHostToDevice));
    if (tile_bytes) RESHARD_CUDA_CHECK(cudaMemcpy(tiles_, tiles.data(), tile_bytes, cudaMemcpyHostToDevice));
  }

  void run(const BufferBases& b, StreamHandle stream) override {
    RESHARD_CUDA_CHECK(cuda::launch_copies(regions_, tiles_, tile_count_, max_blocks_, cuda::device_bases(b),
                                           static_cast<cudaStream_t>(stream)));
  }

 private:
  int max_blocks_;
  int tile_count_ = 0;
  std::unique_ptr<DeviceMemory> memory_;
  cuda::DeviceCopyRegion* regions_ = nullptr;
  cuda::DeviceCopyTile* tiles_ = nullptr;
};

class CudaDeviceEvent : public DeviceEvent {
 public:
  CudaDeviceEvent() = default;
  void record(StreamHandle stream) override { event_.record(static_cast<cudaStream_t>(stream)); }
  void wait(StreamHandle waiter) override {
    RESHARD_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(waiter), event_.get(), 0));
  }
  double elapsed_ms_since(const DeviceEvent& start) const override {
    return event_.elapsed_ms_since(static_cast<const CudaDeviceEvent&>(start).event_);
  }

 private:
  CudaEvent event_{true};
};

}  // namespace

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

CudaStream::CudaStream(int device) {
  RESHARD_CUDA_CHECK(cudaSetDevice(device));
  RESHARD_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}
CudaStream::~CudaStream() {
  if (stream_) cudaStreamDestroy(stream_);
}
void CudaStream::synchronize() const { RESHARD_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

CudaEvent::CudaEvent(bool timing) {
  RESHARD_CUDA_CHECK(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
}
CudaEvent::~CudaEvent() {
  if (event_) cudaEventDestroy(event_);
}
void CudaEvent::record(cudaStream_t stream) { RESHARD_CUDA_CHECK(cudaEventRecord(event_, stream)); }
float CudaEvent::elapsed_ms_since(const CudaEvent& start) const {
  float ms = 0;
  RESHARD_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, event_));
  return ms;
}

CudaDevice::CudaDevice(int device) : device_(device) {
  int n = cuda_device_count();
  RESHARD_REQUIRE(device >= 0 && device < n, "CUDA device ", device, " does not exist (", n, " visible)");
  RESHARD_CUDA_CHECK(cudaSetDevice(device));
  for (auto& lane : lanes_) lane = std::make_unique<CudaStream>(device);
  RESHARD_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device));
}

std::unique_ptr<DeviceEvent> CudaDevice::create_event() { return std::make_unique<CudaDeviceEvent>(); }

StreamHandle CudaDevice::lane(Lane lane) {
  RESHARD_REQUIRE(lane != Lane::kMain, "internal: the main lane is the caller's stream");
  return lanes_[static_cast<int>(lane) - 1]->handle();
}

CudaDevice::~CudaDevice() = default;

std::unique_ptr<DeviceMemory> CudaDevice::allocate(size_t bytes) {
  return std::make_unique<CudaMemory>(device_, bytes);
}

std::unique_ptr<CopyBatch> CudaDevice::prepare_copies(const Copies& copies, int element_size) {
  // Copies beside communication run while NCCL kernels move data: cap them at half the SMs.
  const int max_blocks = copies.beside_communication ? std::max(1, sm_count_ / 2) * 2 : 0;
  return std::make_unique<CudaCopyBatch>(device_, copies.regions, element_size, max_blocks);
}

void CudaDevice::check_buffer(const void* data, size_t bytes, const char* what) const {
  RESHARD_REQUIRE(data != nullptr, what, " buffer is null but ", bytes, " bytes are needed");
  cudaPointerAttributes attr{};
  cudaError_t err = cudaPointerGetAttributes(&attr, data);
  if (err != cudaSuccess) {
    cudaGetLastError();
    fail(ErrorKind::kInvalidArgument,
         cat(what, " buffer ", data, " is not memory CUDA knows: ", cudaGetErrorString(err)));
  }
  RESHARD_REQUIRE(attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged, what, " buffer ", data,
                  " is not device memory (a host pointer?)");
  RESHARD_REQUIRE(attr.type == cudaMemoryTypeManaged || attr.device == device_, what, " buffer ", data,
                  " lives on GPU ", attr.device, ", not on this rank's GPU ", device_);
}

}  // namespace reshard
