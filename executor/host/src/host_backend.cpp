#include "reshard/host_backend.hpp"

#include <algorithm>
#include <cstring>
#include <exception>
#include <thread>

#include "reshard/dtype_convert.hpp"
#include "reshard/host_reduce.hpp"

namespace reshard {

// ---- HostWorld ---------------------------------------------------------------------------------------------------

namespace {

void check_host_ranks(int n, int least) {
  RESHARD_REQUIRE(n >= least && n <= kMaxHostRanks, "the host backend runs ", least, " to ", kMaxHostRanks,
                  " ranks (one thread each), got ", n, "; use the NCCL backend for larger meshes");
}

}  // namespace

HostWorld::HostWorld(int size, HostWorldOptions options)
    : size_((check_host_ranks(size, 1), size)), options_(options), inboxes_(size) {}

std::optional<std::string> HostWorld::aborted() const {
  if (!aborting_.load()) return std::nullopt;
  std::lock_guard<std::mutex> lock(abort_mutex_);
  return abort_reason_;
}

void HostWorld::post_signal(std::uint64_t context, int src, int dst, int phase) {
  Inbox& in = inboxes_.at(dst);
  {
    std::lock_guard<std::mutex> lock(in.mutex);
    ++in.signals[{context, src, phase}];
  }
  in.ready.notify_all();
}

void HostWorld::await_signal(std::uint64_t context, int src, int dst, int phase, std::uint64_t count) {
  Inbox& in = inboxes_.at(dst);
  std::unique_lock<std::mutex> lock(in.mutex);
  std::uint64_t& have = in.signals[{context, src, phase}];
  bool ready =
      in.ready.wait_for(lock, options_.timeout, [&] { return have >= count || in.released || aborting_.load(); });
  if (in.released) return;
  if (std::optional<std::string> reason = aborted())
    fail(ErrorKind::kBackend, cat("rank ", dst, " stopped waiting for rank ", src, ": ", *reason));
  if (!ready)
    fail(ErrorKind::kTimeout, cat("rank ", dst, " timed out after ", options_.timeout.count(), " ms waiting for rank ",
                                  src, " to reach the same one-sided step"));
}

void HostWorld::release_signals(int dst) {
  Inbox& in = inboxes_.at(dst);
  {
    std::lock_guard<std::mutex> lock(in.mutex);
    in.released = true;
  }
  in.ready.notify_all();
}

void HostWorld::post(std::uint64_t context, int src, int dst, const void* data, size_t bytes) {
  std::vector<std::byte> message(bytes);
  if (bytes) std::memcpy(message.data(), data, bytes);
  Inbox& in = inboxes_.at(dst);
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(in.mutex);
    in.messages.emplace(std::tuple{context, src, in.arrivals++}, std::move(message));
    wake = in.awaited == From{context, src};
  }
  if (wake) in.ready.notify_all();
}

void HostWorld::take(std::uint64_t context, int src, int dst, void* data, size_t bytes) {
  Inbox& in = inboxes_.at(dst);
  std::unique_lock<std::mutex> lock(in.mutex);
  auto first = in.messages.end();
  auto arrived = [&] {
    first = in.messages.lower_bound({context, src, 0});
    return (first != in.messages.end() && std::get<0>(first->first) == context && std::get<1>(first->first) == src) ||
           aborting_.load();
  };
  bool ready = arrived();
  if (!ready) {
    in.awaited = From{context, src};
    ready = in.ready.wait_for(lock, options_.timeout, arrived);
    in.awaited.reset();
  }
  if (std::optional<std::string> reason = aborted())
    fail(ErrorKind::kBackend, cat("rank ", dst, " stopped waiting for rank ", src, ": ", *reason));
  if (!ready)
    fail(ErrorKind::kTimeout, cat("rank ", dst, " timed out after ", options_.timeout.count(),
                                  " ms waiting for data from rank ", src, " (did it fail or never post its send?)"));
  std::vector<std::byte> message = std::move(first->second);
  in.messages.erase(first);
  if (message.size() != bytes)
    fail(ErrorKind::kBackend,
         cat("rank ", dst, " expected ", bytes, " bytes from rank ", src, " but got ", message.size()));
  if (bytes) std::memcpy(data, message.data(), bytes);
}

HostWorld::Board& HostWorld::board(std::uint64_t context, int first_member) {
  std::lock_guard<std::mutex> lock(boards_mutex_);
  std::unique_ptr<Board>& b = boards_[{context, first_member}];
  if (!b) b = std::make_unique<Board>();
  return *b;
}

void HostWorld::gather(std::uint64_t context, const std::vector<int>& members, int index, const void* send, void* recv,
                       size_t bytes) {
  const int n = static_cast<int>(members.size()), rank = members[index];
  Board& b = board(context, members.front());
  std::unique_lock<std::mutex> lock(b.mutex);
  // Waits for `done`; a timeout names the first member that has not arrived in this round.
  auto wait = [&](const auto& done) {
    const bool ok = b.ready.wait_for(lock, options_.timeout, [&] { return done() || aborting_.load(); });
    if (std::optional<std::string> reason = aborted())
      fail(ErrorKind::kBackend, cat("rank ", rank, " stopped waiting in a collective: ", *reason));
    if (ok) return;
    int missing = 0;
    while (missing < n && b.present[missing]) ++missing;
    fail(ErrorKind::kTimeout,
         cat("rank ", rank, " timed out after ", options_.timeout.count(), " ms waiting for data from rank ",
             members[missing < n ? missing : 0], " in a collective of ", n, " ranks (did it fail or never join?)"));
  };
  if (b.present.empty()) b.present.assign(n, 0);
  wait([&] { return b.readers == 0; });  // the previous round is read
  const size_t total = bytes * static_cast<size_t>(n);
  if (b.arrived == 0) b.data.resize(total);
  if (b.data.size() != total)
    fail(ErrorKind::kBackend, cat("rank ", rank, " gathers ", bytes, " bytes per member; the other members ",
                                  b.data.size() / static_cast<size_t>(n)));
  if (bytes) std::memcpy(b.data.data() + static_cast<size_t>(index) * bytes, send, bytes);
  b.present[index] = 1;
  const std::uint64_t round = b.round;
  if (++b.arrived == n) {
    b.arrived = 0;
    std::fill(b.present.begin(), b.present.end(), 0);
    b.readers = n;
    ++b.round;
    b.ready.notify_all();
  } else {
    wait([&] { return b.round != round; });
  }
  lock.unlock();  // no round writes before every member has read this one
  if (total) std::memcpy(recv, b.data.data(), total);
  lock.lock();
  if (--b.readers == 0) b.ready.notify_all();
}

void HostWorld::abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(abort_mutex_);
    if (abort_reason_.empty()) abort_reason_ = reason.empty() ? "aborted" : reason;
  }
  aborting_.store(true);
  // Each waiting place's lock is taken once after the flag is set, so no rank checks it and then misses the wakeup.
  for (Inbox& in : inboxes_) {
    { std::lock_guard<std::mutex> lock(in.mutex); }
    in.ready.notify_all();
  }
  std::lock_guard<std::mutex> boards(boards_mutex_);
  for (auto& [context, b] : boards_) {
    { std::lock_guard<std::mutex> lock(b->mutex); }
    b->ready.notify_all();
  }
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
  world_.gather(context_, members_, index_, send, recv, bytes);
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
  std::vector<const void*> parts(n);
  for (int j = 0; j < n; ++j) parts[j] = chunks.data() + j * bytes;
  host_reduce(recv, parts, count, dtype, op, op == ReduceOp::kAvg ? n : 1);
}

void HostCommunicator::all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op, StreamHandle) {
  const int n = size();
  const size_t bytes = count * element_size(dtype);
  std::vector<std::byte> all(bytes * n);
  gather_all(send, all.data(), bytes);
  std::vector<const void*> parts(n);
  for (int j = 0; j < n; ++j) parts[j] = all.data() + j * bytes;
  host_reduce(recv, parts, count, dtype, op, op == ReduceOp::kAvg ? n : 1);
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

void HostCommunicator::all_gather_host(const void* send, void* recv, size_t bytes) { gather_all(send, recv, bytes); }

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

// Copies rows of `es`-byte elements; with a conversion (dtype != output_dtype), rows written into an output buffer are
// converted element by element (dtype_convert.hpp), their offsets in elements of the output dtype (address_of).
class HostCopyBatch : public CopyBatch {
 public:
  HostCopyBatch(std::vector<CopyRegion> regions, int es) : regions_(std::move(regions)), es_(es) {}
  HostCopyBatch(std::vector<CopyRegion> regions, DType dtype, DType output_dtype)
      : regions_(std::move(regions)), es_(element_size(dtype)), dtype_(dtype), output_dtype_(output_dtype) {}
  void run(const BufferBases& b, StreamHandle) override {
    for (const CopyRegion& r : regions_) copy(b, r);
  }

 private:
  void copy(const BufferBases& b, const CopyRegion& r) const {
    const int nd = r.shape.size();
    const size_t row = static_cast<size_t>(r.shape[nd - 1]) * es_;
    Index rows = 1;
    for (int d = 0; d < nd - 1; ++d) rows *= r.shape[d];
    const auto* src = static_cast<const std::byte*>(address_of(b, r.src, es_));
    auto* dst = static_cast<std::byte*>(const_cast<void*>(address_of(b, r.dst, es_)));
    const bool converts = dtype_ != output_dtype_ && r.dst.buffer == Buffer::kOutput;
    const int dst_es = converts ? element_size(output_dtype_) : es_;
    Dims idx(nd, 0);
    for (Index i = 0; i < rows; ++i) {
      Index so = 0, dof = 0;
      for (int d = 0; d < nd - 1; ++d) {
        so += idx[d] * r.src_strides[d];
        dof += idx[d] * r.dst_strides[d];
      }
      if (converts)
        convert_elements(src + so * es_, dtype_, dst + dof * dst_es, output_dtype_, r.shape[nd - 1]);
      else
        std::memmove(dst + dof * es_, src + so * es_, row);
      for (int d = nd - 2; d >= 0; --d) {
        if (++idx[d] < r.shape[d]) break;
        idx[d] = 0;
      }
    }
  }
  std::vector<CopyRegion> regions_;
  int es_;
  DType dtype_ = DType::kU8, output_dtype_ = DType::kU8;  // equal: no conversion
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

std::unique_ptr<CopyBatch> HostDevice::prepare_copies(const Copies& copies, int element_size) {
  return std::make_unique<HostCopyBatch>(copies.regions, element_size);
}

std::unique_ptr<CopyBatch> HostDevice::prepare_copies(const Copies& copies, DType dtype, DType output_dtype) {
  if (dtype != output_dtype) require_convertible(dtype, output_dtype);
  return std::make_unique<HostCopyBatch>(copies.regions, dtype, output_dtype);
}

void HostDevice::check_buffer(const void* data, size_t bytes, const char* what) const {
  RESHARD_REQUIRE(data != nullptr || bytes == 0, what, " buffer is null but ", bytes, " bytes are needed");
}

// ---- helpers -----------------------------------------------------------------------------------------------------

void run_ranks(int n, const std::function<void(int)>& fn, HostWorld* world) {
  run_ranks(n, fn, world, [](std::function<void()> body) { return std::thread(std::move(body)); });
}

// How many other ranks' timeouts a timeout error quotes.
constexpr int kTimeoutsListed = 7;

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
      // A wait that the abort ended (for a rank's message or in a collective) says "stopped waiting".
      if (std::string(e.what()).find(" stopped waiting ") == std::string::npos) first = errors[r];
    } catch (...) {
      first = errors[r];
    }
  }
  for (int r = 0; r < n && !first; ++r)
    if (errors[r]) first = errors[r];
  if (!first) return;
  // A timeout names what its rank waited for; the other ranks that timed out say what they waited for (a stall is a
  // cycle of waits, and one rank's side shows only half of it).
  std::string others;
  int listed = 0;
  try {
    std::rethrow_exception(first);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kTimeout) throw;
    for (int r = 0; r < n; ++r) {
      if (!errors[r] || errors[r] == first) continue;
      try {
        std::rethrow_exception(errors[r]);
      } catch (const Error& other) {
        if (other.kind() != ErrorKind::kTimeout || listed == kTimeoutsListed) continue;
        others += cat(" | also ", other.what());
        ++listed;
      } catch (...) {
      }
    }
    if (others.empty()) throw;
    fail(ErrorKind::kTimeout, cat(e.what(), others));
  }
}

}  // namespace reshard
