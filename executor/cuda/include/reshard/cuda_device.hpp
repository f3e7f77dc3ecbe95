// The CUDA device: memory, streams and events as RAII values, and batched copy kernels for the executor.
#pragma once

#include <cuda_runtime.h>

#include <memory>

#include "reshard/backend.hpp"
#include "reshard/box.hpp"

namespace reshard {

// Number of CUDA devices visible (0 when there is no driver or no GPU).
int cuda_device_count();

// A non-blocking stream on `device`, taken from a per-process pool and given back (when idle) on destruction, so a
// process that builds executors again and again reuses a handful of streams instead of creating new ones. CUDA maps
// streams onto CUDA_DEVICE_MAX_CONNECTIONS hardware queues in the order they are created; a fresh stream per executor
// eventually shares a queue with a live one, and where ranks share a GPU a one-sided wait at the head of that queue
// blocks the other rank's post behind it (a deadlock: tests/executor/gpu/shared_gpu_test.cpp). A stream still busy at
// destruction (a run that timed out) is destroyed, never reused.
class CudaStream {
 public:
  explicit CudaStream(int device);
  ~CudaStream();
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  cudaStream_t get() const { return stream_; }
  StreamHandle handle() const { return stream_; }
  void synchronize() const;

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
};

class CudaEvent {
 public:
  explicit CudaEvent(bool timing = true);
  ~CudaEvent();
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream);
  // Milliseconds from `start` to this event (both recorded and complete).
  float elapsed_ms_since(const CudaEvent& start) const;

 private:
  cudaEvent_t event_ = nullptr;
};

class CudaDevice : public Device {
 public:
  // Sets `device` current for the calling thread; kBackend if it does not exist.
  explicit CudaDevice(int device);
  ~CudaDevice() override;

  int ordinal() const { return device_; }
  std::unique_ptr<DeviceMemory> allocate(size_t bytes) override;
  std::unique_ptr<DeviceEvent> create_event() override;
  StreamHandle lane(Lane lane) override;
  std::unique_ptr<CopyBatch> prepare_copies(const Copies& copies, int element_size) override;
  std::unique_ptr<CopyBatch> prepare_reductions(const std::vector<ReduceRegion>& regions, DType dtype) override;
  // Conversions into the output buffers (backend.hpp): the copy kernel and the reduction kernel convert as they store.
  std::unique_ptr<CopyBatch> prepare_copies(const Copies& copies, DType dtype, DType output_dtype) override;
  std::unique_ptr<CopyBatch> prepare_reductions(const std::vector<ReduceRegion>& regions, DType dtype,
                                                DType output_dtype) override;
  void check_buffer(const void* data, size_t bytes, const char* what) const override;
  // Ranks of this host whose GPUs can access each other: peers' buffers mapped directly (same process) or through
  // CUDA IPC (other processes), ordering flags posted by copy engines and awaited by stream memory operations.
  std::unique_ptr<PeerLink> connect_peers(Communicator& comm) override;
  void range_push(const char* name) override;
  void range_pop() override;

 private:
  int device_;
  int sm_count_ = 0;
  std::unique_ptr<CudaStream> lanes_[3];  // local copies, packing, unpacking (overlap the main stream)
};

}  // namespace reshard
