#include "reshard/cuda_device.hpp"

#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "copy_batches.hpp"
#include "cuda_peer_link.hpp"
#include "kernels.hpp"
#include "reduce_kernels.hpp"
#include "reshard/cuda_check.hpp"
#include "reshard/dtype_convert.hpp"

namespace reshard {

namespace detail {

void throw_cuda(cudaError_t err, const char* call, const char* file, int line) {
  fail(ErrorKind::kBackend,
       cat(file, ":", line, ": ", call, " failed: ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")"));
}

}  // namespace detail

namespace {

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

// reshard's kernels loaded into `device`'s context once per process, before any run: a lazily loaded kernel
// (CUDA_MODULE_LOADING=LAZY, PyTorch's default) may synchronise the context at its first launch, and a context-wide
// synchronisation waits for streams that one-sided waits hold until peers post (NCCL loads its kernels at init too).
void load_kernels(int device) {
  static std::mutex mutex;
  static std::set<int> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  if (loaded.count(device)) return;
  RESHARD_CUDA_CHECK(cuda::load_copy_kernels());
  RESHARD_CUDA_CHECK(cuda::load_reduce_kernels());
  RESHARD_CUDA_CHECK(cuda::load_fused_reduce_kernels());
  loaded.insert(device);
}

}  // namespace

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

namespace {

// Idle streams per device, at most kIdlePerDevice each (more are destroyed). Never destroyed itself: streams may be
// given back during static destruction, after the CUDA runtime has begun shutting down.
class StreamPool {
 public:
  cudaStream_t take(int device) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      std::vector<cudaStream_t>& idle = idle_[device];
      if (!idle.empty()) {
        cudaStream_t s = idle.back();
        idle.pop_back();
        return s;
      }
    }
    cudaStream_t s = nullptr;
    RESHARD_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
  }
  void give_back(int device, cudaStream_t s) {
    if (cudaStreamQuery(s) == cudaSuccess) {
      std::lock_guard<std::mutex> lock(mutex_);
      std::vector<cudaStream_t>& idle = idle_[device];
      if (idle.size() < kIdlePerDevice) {
        idle.push_back(s);
        return;
      }
    }
    cudaGetLastError();  // a failed query (a broken context) is not this destructor's error to report
    cudaStreamDestroy(s);
  }

 private:
  static constexpr size_t kIdlePerDevice = 64;
  std::mutex mutex_;
  std::map<int, std::vector<cudaStream_t>> idle_;
};

StreamPool& stream_pool() {
  static StreamPool* pool = new StreamPool;  // leaked on purpose (see StreamPool)
  return *pool;
}

}  // namespace

CudaStream::CudaStream(int device) : device_(device) {
  RESHARD_CUDA_CHECK(cudaSetDevice(device));
  stream_ = stream_pool().take(device);
}
CudaStream::~CudaStream() {
  if (stream_) stream_pool().give_back(device_, stream_);
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
  load_kernels(device);
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
  if (copies.engine == CopyEngine::kCopyEngine) return cuda::make_engine_copies(copies.regions, element_size);
  // Copies beside communication run while NCCL kernels move data: cap them at half the SMs.
  const int max_blocks = copies.beside_communication ? std::max(1, sm_count_ / 2) * 2 : 0;
  return cuda::make_kernel_copies(*this, device_, copies.regions, element_size, max_blocks);
}

// A converting batch: its regions into an output buffer on the pair's converting kernel, the others (if any) on the
// plain copy kernel, one launch each (the regions of one batch are independent).
std::unique_ptr<CopyBatch> CudaDevice::prepare_copies(const Copies& copies, DType dtype, DType output_dtype) {
  if (dtype == output_dtype) return prepare_copies(copies, element_size(dtype));
  require_convertible(dtype, output_dtype);
  Copies plain = copies, converting = copies;
  plain.regions.clear();
  converting.regions.clear();
  for (const CopyRegion& r : copies.regions)
    (r.dst.buffer == Buffer::kOutput ? converting : plain).regions.push_back(r);
  if (converting.regions.empty()) return prepare_copies(copies, element_size(dtype));
  RESHARD_REQUIRE(copies.engine == CopyEngine::kKernel,
                  "internal: copies that convert into the output run on the copy kernel, not the copy engines");
  const int max_blocks = copies.beside_communication ? std::max(1, sm_count_ / 2) * 2 : 0;
  std::unique_ptr<CopyBatch> convert =
      cuda::make_converting_copies(*this, device_, converting.regions, dtype, output_dtype, max_blocks);
  if (plain.regions.empty()) return convert;
  std::vector<std::unique_ptr<CopyBatch>> parts;
  parts.push_back(prepare_copies(plain, element_size(dtype)));
  parts.push_back(std::move(convert));
  return std::make_unique<cuda::SplitBatch>(std::move(parts));
}

std::unique_ptr<PeerLink> CudaDevice::connect_peers(Communicator& comm) {
  return cuda::connect_cuda_peers(comm, *this, device_);
}

// NVTX (header-only, part of the CUDA toolkit): a few nanoseconds when no profiler is attached.
void CudaDevice::range_push(const char* name) { nvtxRangePushA(name); }
void CudaDevice::range_pop() { nvtxRangePop(); }

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
