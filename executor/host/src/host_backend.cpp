#include "reshard/host_backend.hpp"

#include <cstring>
#include <exception>
#include <thread>

#include "reshard/detail/half.hpp"
#include "reshard/detail/reduce_math.hpp"

namespace reshard {

// ---- HostWorld ---------------------------------------------------------------------------------------------------

namespace {

void check_host_ranks(int n, int least) {
  RESHARD_REQUIRE(n >= least && n <= kMaxHostRanks, "the host backend runs ", least, " to ", kMaxHostRanks,
                  " ranks (one thread each), got ", n, "; use the NCCL backend for larger meshes");
}

}  // namespace

HostWorld::HostWorld(int size, HostWorldOptions options) : size_(size), options_(options) { check_host_ranks(size, 1); }

void HostWorld::post(std::uint64_t context, int src, int dst, const void* data, size_t bytes) {
  std::vector<std::byte> message(bytes);
  if (bytes) std::memcpy(message.data(), data, bytes);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    mailboxes_[Key{context, src, dst}].push_back(std::move(message));
  }
  cv_.notify_all();
}

void HostWorld::take(std::uint64_t context, int src, int dst, void* data, size_t bytes) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto& box = mailboxes_[Key{context, src, dst}];
  bool ready = cv_.wait_for(lock, options_.timeout, [&] { return !box.empty() || !abort_reason_.empty(); });
  if (!abort_reason_.empty())
    fail(ErrorKind::kBackend, cat("rank ", dst, " stopped waiting for rank ", src, ": ", abort_reason_));
  if (!ready)
    fail(ErrorKind::kTimeout, cat("rank ", dst, " timed out after ", options_.timeout.count(),
                                  " ms waiting for data from rank ", src, " (did it fail or never post its send?)"));
  std::vector<std::byte> message = std::move(box.front());
  box.pop_front();
  if (message.size() != bytes)
    fail(ErrorKind::kBackend,
         cat("rank ", dst, " expected ", bytes, " bytes from rank ", src, " but got ", message.size()));
  if (bytes) std::memcpy(data, message.data(), bytes);
}

void HostWorld::abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (abort_reason_.empty()) abort_reason_ = reason.empty() ? "aborted" : reason;
  }
  cv_.notify_all();
}

// ---- HostCommunicator --------------------------------------------------------------------------------------------

namespace {

std::vector<int> iota(int n) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

std::uint64_t child_context(std::uint64_t parent, const std::string& group_key) {
  std::uint64_t h = parent * 1000003u + 0x9e3779b97f4a7c15ull;
  for (unsigned char c : group_key) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

}  // namespace

HostCommunicator::HostCommunicator(HostWorld& world, int rank) : HostCommunicator(world, iota(world.size()), rank, 0) {
  RESHARD_REQUIRE(rank >= 0 && rank < world.size(), "rank ", rank, " is not in a host world of ", world.size());
}

HostCommunicator::HostCommunicator(HostWorld& world, std::vector<int> members, int index, std::uint64_t context)
    : world_(world), members_(std::move(members)), index_(index), context_(context) {}

void HostCommunicator::exchange(std::span<const SendOp> sends, std::span<const RecvOp> recvs, StreamHandle) {
  const int me = members_[index_];
  for (const SendOp& s : sends) {
    RESHARD_REQUIRE(s.peer >= 0 && s.peer < size(), "send to rank ", s.peer, " outside a communicator of ", size());
    world_.post(context_, me, members_[s.peer], s.data, s.bytes);
  }
  for (const RecvOp& r : recvs) {
    RESHARD_REQUIRE(r.peer >= 0 && r.peer < size(), "receive from rank ", r.peer, " outside a communicator of ",
                    size());
    world_.take(context_, members_[r.peer], me, r.data, r.bytes);
  }
}

void HostCommunicator::gather_all(const void* send, void* recv, size_t bytes) {
  const int n = size(), me = members_[index_];
  for (int j = 0; j < n; ++j)
    if (j != index_) world_.post(context_, me, members_[j], send, bytes);
  auto* out = static_cast<std::byte*>(recv);
  if (bytes) std::memmove(out + index_ * bytes, send, bytes);
  for (int j = 0; j < n; ++j)
    if (j != index_) world_.take(context_, members_[j], me, out + j * bytes, bytes);
}

void HostCommunicator::all_gather(const void* send, void* recv, size_t bytes_per_rank, StreamHandle) {
  gather_all(send, recv, bytes_per_rank);
}

void HostCommunicator::reduce_scatter(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                                      StreamHandle) {
  const int n = size(), me = members_[index_];
  const size_t bytes = count * element_size(dtype);
  const auto* in = static_cast<const std::byte*>(send);
  for (int j = 0; j < n; ++j)
    if (j != index_) world_.post(context_, me, members_[j], in + j * bytes, bytes);
  // Reduce in member order, so every rank computes the same bits.
  std::vector<std::byte> chunks(bytes * n);
  for (int j = 0; j < n; ++j) {
    if (j == index_) {
      if (bytes) std::memcpy(chunks.data() + j * bytes, in + index_ * bytes, bytes);
    } else {
      world_.take(context_, members_[j], me, chunks.data() + j * bytes, bytes);
    }
  }
  for (int j = 1; j < n; ++j) host_reduce(chunks.data(), chunks.data() + j * bytes, count, dtype, op);
  if (op == ReduceOp::kAvg) host_divide(chunks.data(), count, dtype, n);
  if (bytes) std::memcpy(recv, chunks.data(), bytes);
}

void HostCommunicator::all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op, StreamHandle) {
  const int n = size();
  const size_t bytes = count * element_size(dtype);
  std::vector<std::byte> all(bytes * n);
  gather_all(send, all.data(), bytes);
  for (int j = 1; j < n; ++j) host_reduce(all.data(), all.data() + j * bytes, count, dtype, op);
  if (op == ReduceOp::kAvg) host_divide(all.data(), count, dtype, n);
  if (bytes) std::memcpy(recv, all.data(), bytes);
}

Communicator& HostCommunicator::group(const Mesh& mesh, const std::vector<int>& mesh_dims) {
  const std::string key = group_key(mesh, mesh_dims);
  auto it = groups_.find(key);
  if (it != groups_.end()) return *it->second;
  RESHARD_REQUIRE(mesh.size() == size(), "mesh ", mesh.str(), " has ", mesh.size(), " ranks; this communicator ",
                  size());
  std::vector<int> local = mesh.group(index_, mesh_dims);  // ranks of this communicator
  std::vector<int> world_ranks;
  for (int r : local) world_ranks.push_back(members_[r]);
  auto child = std::unique_ptr<HostCommunicator>(new HostCommunicator(
      world_, std::move(world_ranks), mesh.group_index(index_, mesh_dims), child_context(context_, key)));
  return *groups_.emplace(key, std::move(child)).first->second;
}

void HostCommunicator::wait(StreamHandle, std::chrono::milliseconds) {}  // host work is done when enqueued

// ---- HostDevice --------------------------------------------------------------------------------------------------

namespace {

class HostMemory : public DeviceMemory {
 public:
  explicit HostMemory(size_t bytes) : bytes_(bytes), data_(new std::byte[bytes ? bytes : 1]) {}
  void* data() override { return data_.get(); }
  size_t bytes() const override { return bytes_; }

 private:
  size_t bytes_;
  std::unique_ptr<std::byte[]> data_;
};

class HostCopyBatch : public CopyBatch {
 public:
  HostCopyBatch(std::vector<CopyRegion> regions, int es) : regions_(std::move(regions)), es_(es) {}
  size_t regions() const override { return regions_.size(); }
  void run(const BufferBases& b, StreamHandle) override {
    for (const CopyRegion& r : regions_) copy(b, r);
  }

 private:
  void copy(const BufferBases& b, const CopyRegion& r) const {
    auto base = [&](Buffer buf) -> std::byte* {
      return static_cast<std::byte*>(buf == Buffer::kInput    ? const_cast<void*>(b.input)
                                     : buf == Buffer::kOutput ? b.output
                                                              : b.work);
    };
    const int nd = r.shape.size();
    const size_t row = static_cast<size_t>(r.shape[nd - 1]) * es_;
    Index rows = 1;
    for (int d = 0; d < nd - 1; ++d) rows *= r.shape[d];
    std::byte* src = base(r.src.buffer) + r.src.offset * es_;
    std::byte* dst = base(r.dst.buffer) + r.dst.offset * es_;
    Dims idx(nd, 0);
    for (Index i = 0; i < rows; ++i) {
      Index so = 0, dof = 0;
      for (int d = 0; d < nd - 1; ++d) {
        so += idx[d] * r.src_strides[d];
        dof += idx[d] * r.dst_strides[d];
      }
      std::memmove(dst + dof * es_, src + so * es_, row);
      for (int d = nd - 2; d >= 0; --d) {
        if (++idx[d] < r.shape[d]) break;
        idx[d] = 0;
      }
    }
  }
  std::vector<CopyRegion> regions_;
  int es_;
};

// Host work is done when enqueued: an event only timestamps.
class HostEvent : public DeviceEvent {
 public:
  void record(StreamHandle) override { at_ = std::chrono::steady_clock::now(); }
  void wait(StreamHandle) override {}
  double elapsed_ms_since(const DeviceEvent& start) const override {
    return std::chrono::duration<double, std::milli>(at_ - static_cast<const HostEvent&>(start).at_).count();
  }

 private:
  std::chrono::steady_clock::time_point at_{};
};

}  // namespace

std::unique_ptr<DeviceMemory> HostDevice::allocate(size_t bytes) { return std::make_unique<HostMemory>(bytes); }

std::unique_ptr<DeviceEvent> HostDevice::create_event() { return std::make_unique<HostEvent>(); }

std::unique_ptr<CopyBatch> HostDevice::prepare_copies(const std::vector<CopyRegion>& regions, int element_size) {
  return std::make_unique<HostCopyBatch>(regions, element_size);
}

void HostDevice::check_buffer(const void* data, size_t bytes, const char* what) const {
  RESHARD_REQUIRE(data != nullptr || bytes == 0, what, " buffer is null but ", bytes, " bytes are needed");
}

// ---- helpers -----------------------------------------------------------------------------------------------------

void run_ranks(int n, const std::function<void(int)>& fn, HostWorld* world) {
  run_ranks(n, fn, world, [](std::function<void()> body) { return std::thread(std::move(body)); });
}

void run_ranks(int n, const std::function<void(int)>& fn, HostWorld* world, const ThreadStarter& start_thread) {
  check_host_ranks(n, 0);
  std::vector<std::exception_ptr> errors(n);
  std::vector<std::thread> threads;
  threads.reserve(n);
  // Every thread waits at this gate until all exist: a rank never blocks on a peer whose thread was never created.
  struct Gate {
    std::mutex mutex;
    std::condition_variable cv;
    bool open = false, cancelled = false;
  } gate;
  auto release = [&](bool cancel) {
    {
      std::lock_guard<std::mutex> lock(gate.mutex);
      gate.open = true;
      gate.cancelled = cancel;
    }
    gate.cv.notify_all();
  };
  for (int r = 0; r < n; ++r) {
    try {
      threads.push_back(start_thread([&, r] {
        {
          std::unique_lock<std::mutex> lock(gate.mutex);
          gate.cv.wait(lock, [&] { return gate.open; });
          if (gate.cancelled) return;
        }
        try {
          fn(r);
        } catch (const std::exception& e) {
          errors[r] = std::current_exception();
          if (world) world->abort(cat("rank ", r, " failed: ", e.what()));
        } catch (...) {
          errors[r] = std::current_exception();
          if (world) world->abort(cat("rank ", r, " failed"));
        }
      }));
    } catch (const std::exception& e) {
      release(true);
      for (std::thread& t : threads) t.join();
      fail(ErrorKind::kBackend, cat("cannot start the thread of host rank ", r, " of ", n, ": ", e.what(),
                                    "; lower the rank count or raise the process's thread and memory limits"));
    }
  }
  release(false);
  for (std::thread& t : threads) t.join();
  // The first rank that failed for its own reason (not because another aborted the world) explains the failure.
  std::exception_ptr first;
  for (int r = 0; r < n && !first; ++r) {
    if (!errors[r]) continue;
    try {
      std::rethrow_exception(errors[r]);
    } catch (const Error& e) {
      if (std::string(e.what()).find("stopped waiting for rank") == std::string::npos) first = errors[r];
    } catch (...) {
      first = errors[r];
    }
  }
  for (int r = 0; r < n && !first; ++r)
    if (errors[r]) first = errors[r];
  if (first) std::rethrow_exception(first);
}

namespace {

template <class T>
void reduce_typed(T* dst, const T* src, size_t n, ReduceOp op) {
  for (size_t i = 0; i < n; ++i) {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        dst[i] = detail::combine(dst[i], src[i], static_cast<int>(op));  // integers wrap (two's complement)
        break;
      case ReduceOp::kMax:
        dst[i] = std::max(dst[i], src[i]);
        break;
      case ReduceOp::kMin:
        dst[i] = std::min(dst[i], src[i]);
        break;
    }
  }
}

template <float (*ToFloat)(std::uint16_t), std::uint16_t (*FromFloat)(float)>
void reduce_half(std::uint16_t* dst, const std::uint16_t* src, size_t n, ReduceOp op) {
  for (size_t i = 0; i < n; ++i) {
    float a = ToFloat(dst[i]), b = ToFloat(src[i]);
    float r = op == ReduceOp::kMax ? std::max(a, b) : op == ReduceOp::kMin ? std::min(a, b) : a + b;
    dst[i] = FromFloat(r);
  }
}

template <class T>
void divide_typed(T* p, size_t count, int n) {
  for (size_t i = 0; i < count; ++i) p[i] = static_cast<T>(p[i] / static_cast<T>(n));
}

}  // namespace

void host_reduce(void* dst, const void* src, size_t count, DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::kF64:
      return reduce_typed(static_cast<double*>(dst), static_cast<const double*>(src), count, op);
    case DType::kF32:
      return reduce_typed(static_cast<float*>(dst), static_cast<const float*>(src), count, op);
    case DType::kI64:
      return reduce_typed(static_cast<std::int64_t*>(dst), static_cast<const std::int64_t*>(src), count, op);
    case DType::kI32:
      return reduce_typed(static_cast<std::int32_t*>(dst), static_cast<const std::int32_t*>(src), count, op);
    case DType::kI8:
      return reduce_typed(static_cast<std::int8_t*>(dst), static_cast<const std::int8_t*>(src), count, op);
    case DType::kU8:
      return reduce_typed(static_cast<std::uint8_t*>(dst), static_cast<const std::uint8_t*>(src), count, op);
    case DType::kF16:
      return reduce_half<detail::f16_to_float, detail::float_to_f16>(static_cast<std::uint16_t*>(dst),
                                                                     static_cast<const std::uint16_t*>(src), count, op);
    case DType::kBF16:
      return reduce_half<detail::bf16_to_float, detail::float_to_bf16>(
          static_cast<std::uint16_t*>(dst), static_cast<const std::uint16_t*>(src), count, op);
  }
}

void host_divide(void* data, size_t count, DType dtype, int n) {
  switch (dtype) {
    case DType::kF64:
      return divide_typed(static_cast<double*>(data), count, n);
    case DType::kF32:
      return divide_typed(static_cast<float*>(data), count, n);
    case DType::kI64:
      return divide_typed(static_cast<std::int64_t*>(data), count, n);
    case DType::kI32:
      return divide_typed(static_cast<std::int32_t*>(data), count, n);
    case DType::kI8:
      return divide_typed(static_cast<std::int8_t*>(data), count, n);
    case DType::kU8:
      return divide_typed(static_cast<std::uint8_t*>(data), count, n);
    case DType::kF16:
    case DType::kBF16: {
      auto* p = static_cast<std::uint16_t*>(data);
      bool bf = dtype == DType::kBF16;
      for (size_t i = 0; i < count; ++i) {
        float v = (bf ? detail::bf16_to_float(p[i]) : detail::f16_to_float(p[i])) / static_cast<float>(n);
        p[i] = bf ? detail::float_to_bf16(v) : detail::float_to_f16(v);
      }
      return;
    }
  }
}

}  // namespace reshard
