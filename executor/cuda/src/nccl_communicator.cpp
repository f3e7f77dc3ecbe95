#include "reshard/nccl_communicator.hpp"

#include <algorithm>
#include <cstring>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "nccl_types.hpp"
#include "reshard/cuda_check.hpp"
#include "reshard/detail/poll_pacing.hpp"

#define RESHARD_NCCL(call) check((call), #call, __FILE__, __LINE__)

namespace reshard {

namespace detail {

void throw_nccl(ncclResult_t res, ncclComm_t comm, const char* call, const char* file, int line) {
  const char* last = comm ? ncclGetLastError(comm) : ncclGetLastError(nullptr);
  fail(ErrorKind::kBackend, cat(file, ":", line, ": ", call, " failed: ", ncclGetErrorString(res),
                                (last && *last ? std::string(" (") + last + ")" : std::string())));
}

}  // namespace detail

int nccl_version() {
  int v = 0;
  if (const ncclResult_t res = ncclGetVersion(&v); res != ncclSuccess)
    detail::throw_nccl(res, nullptr, "ncclGetVersion", __FILE__, __LINE__);
  return v;
}

namespace {

// How long abort() waits for ncclCommAbort before leaving it to finish alone.
constexpr std::chrono::seconds kAbortGrace{10};

using Clock = std::chrono::steady_clock;

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kAvg:
      return ncclAvg;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kMin:
      return ncclMin;
  }
  fail(ErrorKind::kInternal, "unknown reduce op");
}

long long now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

}  // namespace

class NcclCommunicator::WatchedCall {
 public:
  explicit WatchedCall(NcclCommunicator& c) : c_(c) { c_.call_started_ns_.store(now_ns(), std::memory_order_relaxed); }
  ~WatchedCall() { c_.call_started_ns_.store(0, std::memory_order_relaxed); }

 private:
  NcclCommunicator& c_;
};

NcclCommunicator::NcclCommunicator(ncclComm_t comm, bool owned, NcclOptions options)
    : comm_(comm), owned_(owned), options_(options) {
  RESHARD_REQUIRE(comm != nullptr, "NCCL communicator is null");
  RESHARD_NCCL(ncclCommUserRank(comm_, &rank_));
  RESHARD_NCCL(ncclCommCount(comm_, &size_));
  watchdog_thread_ = std::thread([this] { watchdog(); });
}

void NcclCommunicator::watchdog() {
  const auto period =
      std::max(std::chrono::milliseconds(1), std::min(options_.timeout / 20, std::chrono::milliseconds(200)));
  std::unique_lock<std::mutex> lock(watchdog_mutex_);
  while (!watchdog_cv_.wait_for(lock, period, [this] { return stopping_; })) {
    long long started = call_started_ns_.load(std::memory_order_relaxed);
    if (started != 0 &&
        now_ns() - started > std::chrono::duration_cast<std::chrono::nanoseconds>(options_.timeout).count()) {
      watchdog_fired_ = true;
      lock.unlock();
      abort();  // unblocks the stuck call, which then reports the timeout
      lock.lock();
    }
  }
}

NcclCommunicator::~NcclCommunicator() {
  {
    std::lock_guard<std::mutex> lock(watchdog_mutex_);
    stopping_ = true;
  }
  watchdog_cv_.notify_all();
  if (watchdog_thread_.joinable()) watchdog_thread_.join();
  groups_.clear();
  if (!owned_ || !comm_) return;
  if (aborted_) return;  // ncclCommAbort already released it
  // ncclCommFinalize + Destroy would wait for pending work; if the communicator is in an error state, abort.
  ncclResult_t state = ncclSuccess;
  ncclCommGetAsyncError(comm_, &state);
  if (state != ncclSuccess && state != ncclInProgress) {
    ncclCommAbort(comm_);
  } else {
    ncclCommDestroy(comm_);
  }
}

void NcclCommunicator::check(ncclResult_t result, const char* call, const char* file, int line) {
  if (watchdog_fired_)
    fail(ErrorKind::kTimeout, cat(file, ":", line, ": ", call, " stayed blocked for more than ",
                                  options_.timeout.count(), " ms (a peer never joined?)", abort_text()));
  RESHARD_REQUIRE(!aborted_, "the NCCL communicator was aborted after an earlier failure");
  if (result == ncclSuccess) return;
  if (result == ncclInProgress) return poll_ready(call);
  detail::throw_nccl(result, comm_, call, file, line);
}

void NcclCommunicator::poll_ready(const char* call) {
  const auto deadline = Clock::now() + options_.timeout;
  while (true) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t res = ncclCommGetAsyncError(comm_, &state);
    if (res != ncclSuccess) detail::throw_nccl(res, comm_, "ncclCommGetAsyncError", __FILE__, __LINE__);
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) {
      abort();
      detail::throw_nccl(state, nullptr, call, __FILE__, __LINE__);
    }
    if (Clock::now() > deadline) {
      abort();
      fail(ErrorKind::kTimeout, cat(call, " did not complete within ", options_.timeout.count(),
                                    " ms (a peer never joined?)", abort_text()));
    }
    std::this_thread::yield();
  }
}

void NcclCommunicator::exchange(std::span<const SendOp> sends, std::span<const RecvOp> recvs, StreamHandle stream) {
  WatchedCall watched(*this);
  auto s = static_cast<cudaStream_t>(stream);
  RESHARD_NCCL(ncclGroupStart());
  for (const SendOp& op : sends) RESHARD_NCCL(ncclSend(op.data, op.bytes, ncclUint8, op.peer, comm_, s));
  for (const RecvOp& op : recvs) RESHARD_NCCL(ncclRecv(op.data, op.bytes, ncclUint8, op.peer, comm_, s));
  RESHARD_NCCL(ncclGroupEnd());
}

// The host all-gather's records travel through pinned host memory mapped into the device: the NCCL kernels read and
// write it directly, with no staging copies from and to pageable memory. The staging is allocated once and freed
// only with the communicator: freeing synchronises the device and, with peer access, its peers, so a rank still in a
// run's first all-gather (mapping the peers' buffers) that freed its staging would wait on the peer's stream, which
// already waits for this rank's first post, enqueued only after the free returns: a hang. Growth keeps the smaller
// buffers until the end for the same reason.
struct NcclCommunicator::HostGatherStaging {
  int device = 0;
  cudaStream_t stream = nullptr;
  std::vector<void*> buffers;  // pinned and mapped; the last one in use (an abandoned all-gather may hold others)
  void* mapped = nullptr;      // the device's address of the last one
  size_t capacity = 0;
  ~HostGatherStaging() {
    cudaSetDevice(device);
    if (stream) cudaStreamDestroy(stream);
    for (void* b : buffers) cudaFreeHost(b);
  }
};

namespace {

// Records of at most this many bytes go through the mailbox (a connect's card; exposures gather in pieces this size).
constexpr size_t kMailboxRecordBytes = 16 << 10;

}  // namespace

// The first all_gather_host of every rank lands here (collective): all ranks on one host and each able to open the
// segment, or every rank keeps NCCL.
void NcclCommunicator::connect_mailbox() {
  mailbox_tried_ = true;
  if (!options_.host_mailbox || size_ < 2) return;
  const std::uint64_t mine = detail::machine_id();
  std::vector<std::uint64_t> all(static_cast<size_t>(size_));
  nccl_all_gather_host(&mine, all.data(), sizeof mine);
  for (std::uint64_t id : all)
    if (id != mine) return;
  mailbox_ = detail::HostMailbox::connect(rank_, size_, kMailboxRecordBytes,
                                          [this](const void* s, void* r, size_t b) { nccl_all_gather_host(s, r, b); });
}

void NcclCommunicator::all_gather_host(const void* send, void* recv, size_t bytes) {
  if (!mailbox_tried_) connect_mailbox();
  if (!mailbox_ || bytes > mailbox_->capacity()) return nccl_all_gather_host(send, recv, bytes);
  try {
    mailbox_->all_gather(send, recv, bytes, options_.timeout, [this] { return aborted_.load(); });
  } catch (const Error& e) {
    abort();
    fail(e.kind(), cat(e.what(), abort_text()));
  }
}

void NcclCommunicator::nccl_all_gather_host(const void* send, void* recv, size_t bytes) {
  int device = 0;
  RESHARD_NCCL(ncclCommCuDevice(comm_, &device));
  RESHARD_CUDA_CHECK(cudaSetDevice(device));
  const size_t total = checked_mul(static_cast<Index>(bytes), static_cast<Index>(size_ + 1), "host all-gather bytes");
  if (!host_gather_) {
    auto staging = std::make_unique<HostGatherStaging>();
    staging->device = device;
    RESHARD_CUDA_CHECK(cudaStreamCreateWithFlags(&staging->stream, cudaStreamNonBlocking));
    host_gather_ = std::move(staging);
  }
  HostGatherStaging& x = *host_gather_;
  if (total > x.capacity) {
    const size_t capacity = std::max<size_t>(total, size_t{64} << 10);  // the connect and expose records fit at once
    void* data = nullptr;
    RESHARD_CUDA_CHECK(cudaHostAlloc(&data, capacity, cudaHostAllocMapped));
    x.buffers.push_back(data);
    RESHARD_CUDA_CHECK(cudaHostGetDevicePointer(&x.mapped, data, 0));
    x.capacity = capacity;
  }
  char* data = static_cast<char*>(x.buffers.back());
  char* mapped = static_cast<char*>(x.mapped);
  if (bytes > 0) std::memcpy(data, send, bytes);
  all_gather(mapped, mapped + bytes, bytes, x.stream);
  wait(x.stream, options_.timeout);
  // The all-gather is done (waited for with the timeout above): its kernels' writes to host memory are visible.
  if (bytes > 0) std::memcpy(recv, data + bytes, bytes * static_cast<size_t>(size_));
}

void NcclCommunicator::all_gather(const void* send, void* recv, size_t bytes_per_rank, StreamHandle stream) {
  WatchedCall watched(*this);
  RESHARD_NCCL(ncclAllGather(send, recv, bytes_per_rank, ncclUint8, comm_, static_cast<cudaStream_t>(stream)));
}

void NcclCommunicator::reduce_scatter(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                                      StreamHandle stream) {
  const detail::NcclElements e = detail::nccl_elements(dtype, count, op);
  WatchedCall watched(*this);
  RESHARD_NCCL(ncclReduceScatter(send, recv, e.count, e.type, nccl_op(op), comm_, static_cast<cudaStream_t>(stream)));
}

void NcclCommunicator::all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                                  StreamHandle stream) {
  const detail::NcclElements e = detail::nccl_elements(dtype, count, op);
  WatchedCall watched(*this);
  RESHARD_NCCL(ncclAllReduce(send, recv, e.count, e.type, nccl_op(op), comm_, static_cast<cudaStream_t>(stream)));
}

Communicator& NcclCommunicator::group(const Mesh& mesh, const std::vector<int>& mesh_dims) {
  const std::string group = group_key(mesh, mesh_dims);
  {
    std::lock_guard<std::mutex> lock(abort_mutex_);
    auto it = groups_.find(group);
    if (it != groups_.end()) return *it->second;
  }
  RESHARD_REQUIRE(mesh.size() == size_, "mesh ", mesh.str(), " has ", mesh.size(), " ranks; the communicator ", size_);
  // Color: this rank's coordinates on the other mesh dims; key: its position in the group.
  Dims coord = mesh.coord_of(rank_);
  int color = 0;
  for (int k = 0; k < mesh.ndim(); ++k)
    if (std::find(mesh_dims.begin(), mesh_dims.end(), k) == mesh_dims.end())
      color = color * mesh.dim_size(k) + static_cast<int>(coord[k]);
  int key = mesh.group_index(rank_, mesh_dims);
  // On a non-blocking communicator the split runs as a background job that writes `child` only when it is done
  // (NCCL keeps it NULL until then): wait for the handle, then for the child to be ready, then for the parent.
  ncclComm_t child = nullptr;
  WatchedCall watched(*this);
  ncclResult_t started = ncclCommSplit(comm_, color, key, &child, nullptr);  // inherits this communicator's config
  if (watchdog_fired_)
    fail(ErrorKind::kTimeout, cat("ncclCommSplit stayed blocked for more than ", options_.timeout.count(),
                                  " ms (does every rank prepare the same plan?)", abort_text()));
  if (started != ncclSuccess && started != ncclInProgress)
    detail::throw_nccl(started, comm_, "ncclCommSplit", __FILE__, __LINE__);
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  while (true) {
    ncclResult_t parent_state = ncclSuccess;
    ncclCommGetAsyncError(comm_, &parent_state);
    if (parent_state != ncclSuccess && parent_state != ncclInProgress) {
      abort();
      detail::throw_nccl(parent_state, nullptr, "ncclCommSplit", __FILE__, __LINE__);
    }
    ncclComm_t ready = __atomic_load_n(&child, __ATOMIC_ACQUIRE);
    if (ready) {
      ncclResult_t child_state = ncclSuccess;
      ncclCommGetAsyncError(ready, &child_state);
      if (child_state == ncclSuccess && parent_state == ncclSuccess) break;
      if (child_state != ncclSuccess && child_state != ncclInProgress)
        detail::throw_nccl(child_state, nullptr, "ncclCommSplit (new communicator)", __FILE__, __LINE__);
    }
    if (std::chrono::steady_clock::now() > deadline) {
      abort();
      fail(ErrorKind::kTimeout, cat("ncclCommSplit did not complete within ", options_.timeout.count(),
                                    " ms (does every rank prepare the same plan?)", abort_text()));
    }
    std::this_thread::yield();
  }
  auto sub = std::make_unique<NcclCommunicator>(child, true, options_);
  std::lock_guard<std::mutex> lock(abort_mutex_);
  return *groups_.emplace(group, std::move(sub)).first->second;
}

void NcclCommunicator::wait(StreamHandle stream, std::chrono::milliseconds timeout) {
  wait_releasing(stream, timeout, {});
}

void NcclCommunicator::wait_releasing(StreamHandle stream, std::chrono::milliseconds timeout,
                                      const std::function<void()>& release) {
  // Polled as detail::PollPacing says: back to back for 2 ms, then between sleeps; the peers' errors and the deadline
  // every 50 us.
  detail::PollPacing pace;
  const auto deadline = pace.start() + timeout;
  auto s = static_cast<cudaStream_t>(stream);
  while (true) {
    cudaError_t q = cudaStreamQuery(s);
    if (q == cudaSuccess) return;
    if (q != cudaErrorNotReady) RESHARD_CUDA_CHECK(q);
    if (!pace.checks_due()) continue;  // spinning: nothing else to check yet
    for (NcclCommunicator* c : [&] {
           std::lock_guard<std::mutex> lock(abort_mutex_);
           std::vector<NcclCommunicator*> all{this};
           for (auto& [dims, g] : groups_) all.push_back(g.get());
           return all;
         }()) {
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(c->comm_, &state);
      if (state != ncclSuccess && state != ncclInProgress) {
        abort();
        detail::throw_nccl(state, nullptr, "asynchronous NCCL operation", __FILE__, __LINE__);
      }
    }
    if (Clock::now() > deadline) {
      if (release) release();
      abort();
      fail(ErrorKind::kTimeout, cat("rank ", rank_, ": the redistribution did not finish within ", timeout.count(),
                                    " ms (a peer never posted its part?)", abort_text()));
    }
    pace.rest();
  }
}

void NcclCommunicator::abort() {
  std::lock_guard<std::mutex> lock(abort_mutex_);  // also guards groups_ against group() on another thread
  for (auto& [dims, g] : groups_) g->abort();
  if (!aborted_ && comm_ && may_abort()) {
    aborted_ = true;
    // May run on the watchdog thread while another thread is blocked in NCCL. Bounded: with a stream stuck on a peer
    // that died, ncclCommAbort can block in the driver (freeing pinned memory waits for the device), and the caller's
    // timeout error must not wait for it; past kAbortGrace the abort goes on alone and the communicator is left to
    // the process's end.
    auto finished = std::make_shared<std::promise<void>>();
    std::future<void> done = finished->get_future();
    std::thread([comm = comm_, finished] {
      ncclCommAbort(comm);
      finished->set_value();
    }).detach();
    if (done.wait_for(kAbortGrace) != std::future_status::ready) abandoned_ = true;
  }
}

std::string NcclCommunicator::abort_text() const {
  if (abandoned_)
    return cat("; the NCCL communicator's abort did not finish within ", kAbortGrace.count(),
               " s (the GPU is stuck on a peer that stopped) and goes on alone");
  return may_abort() ? "; the NCCL communicator was aborted"
                     : "; the caller's NCCL communicator was left as it is (reshard does not own it: the caller "
                       "decides whether to abort it; NcclOptions::abort_unowned lets reshard do it)";
}

}  // namespace reshard
