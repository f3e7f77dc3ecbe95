// Creating NCCL communicators: all local GPUs in one process, or one rank per process with the NCCL id passed
// through the rendezvous (reshard/rendezvous.hpp: a file or a TCP handshake guarded by the job token).
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "reshard/cuda_check.hpp"
#include "reshard/nccl_communicator.hpp"
#include "reshard/rendezvous.hpp"

namespace reshard {
namespace {

using Clock = std::chrono::steady_clock;

void nccl_ok(ncclResult_t r, const char* call) {
  if (r != ncclSuccess && r != ncclInProgress) detail::throw_nccl(r, nullptr, call, __FILE__, __LINE__);
}

ncclConfig_t make_config(const NcclOptions& options) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = options.nonblocking ? 0 : 1;
  return config;
}

}  // namespace

std::vector<std::unique_ptr<NcclCommunicator>> make_local_communicators(int n, NcclOptions options) {
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess) gpus = 0;
  RESHARD_REQUIRE(n >= 1 && n <= gpus, "need ", n, " GPUs in this process but ", gpus, " are visible");
  ncclUniqueId id;
  nccl_ok(ncclGetUniqueId(&id), "ncclGetUniqueId");
  std::vector<ncclComm_t> comms(n, nullptr);
  ncclConfig_t config = make_config(options);
  nccl_ok(ncclGroupStart(), "ncclGroupStart");
  for (int i = 0; i < n; ++i) {
    RESHARD_CUDA_CHECK(cudaSetDevice(i));
    nccl_ok(ncclCommInitRankConfig(&comms[i], n, id, i, &config), "ncclCommInitRankConfig");
  }
  nccl_ok(ncclGroupEnd(), "ncclGroupEnd");
  std::vector<std::unique_ptr<NcclCommunicator>> out;
  for (int i = 0; i < n; ++i) {
    RESHARD_CUDA_CHECK(cudaSetDevice(i));
    // Wait for initialisation before querying rank and size.
    const auto deadline = Clock::now() + options.timeout;
    ncclResult_t state = ncclInProgress;
    while (state == ncclInProgress) {
      ncclCommGetAsyncError(comms[i], &state);
      if (state == ncclInProgress && Clock::now() > deadline)
        fail(ErrorKind::kTimeout,
             cat("NCCL initialisation of rank ", i, " did not finish within ", options.timeout.count(), " ms"));
    }
    if (state != ncclSuccess) detail::throw_nccl(state, comms[i], "ncclCommInitRankConfig", __FILE__, __LINE__);
    out.push_back(std::make_unique<NcclCommunicator>(comms[i], true, options));
  }
  return out;
}

std::unique_ptr<NcclCommunicator> make_process_communicator(int rank, int size, int device,
                                                            const std::string& rendezvous, NcclOptions options) {
  RESHARD_REQUIRE(size >= 1 && rank >= 0 && rank < size, "rank ", rank, " is outside a world of ", size);
  RESHARD_CUDA_CHECK(cudaSetDevice(device));
  ncclUniqueId id;
  RendezvousOptions meet;
  meet.timeout = options.timeout;  // the job token comes from RESHARD_RENDEZVOUS_TOKEN
  if (rank == 0) {
    nccl_ok(ncclGetUniqueId(&id), "ncclGetUniqueId");
    rendezvous_publish(rendezvous, size, std::as_bytes(std::span<const ncclUniqueId>(&id, 1)), meet);
  } else {
    std::vector<std::byte> got = rendezvous_fetch(rendezvous, size, rank, sizeof(id), meet);
    std::memcpy(&id, got.data(), sizeof(id));
  }
  // A blocking init waits for every rank; run it on a helper thread so that a rank that never starts becomes a
  // timeout here instead of a hang (the helper is left behind; the caller is expected to exit).
  struct Init {
    std::mutex mutex;
    std::condition_variable cv;
    bool done = false;
    ncclResult_t result = ncclSuccess;
    ncclComm_t comm = nullptr;
  };
  auto init = std::make_shared<Init>();
  ncclConfig_t config = make_config(options);
  std::thread([init, size, id, rank, device, config]() mutable {
    cudaSetDevice(device);
    ncclComm_t c = nullptr;
    ncclResult_t r = ncclCommInitRankConfig(&c, size, id, rank, &config);
    while (r == ncclSuccess || r == ncclInProgress) {  // non-blocking: wait for the end of the initialisation
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(c, &state);
      if (state != ncclInProgress) {
        r = state;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::lock_guard<std::mutex> lock(init->mutex);
    init->result = r;
    init->comm = c;
    init->done = true;
    init->cv.notify_all();
  }).detach();
  ncclComm_t comm = nullptr;
  {
    std::unique_lock<std::mutex> lock(init->mutex);
    if (!init->cv.wait_for(lock, options.timeout, [&] { return init->done; }))
      fail(ErrorKind::kTimeout, cat("NCCL initialisation of rank ", rank, " of ", size, " did not finish within ",
                                    options.timeout.count(), " ms (did every rank start?)"));
    if (init->result != ncclSuccess)
      detail::throw_nccl(init->result, init->comm, "ncclCommInitRankConfig", __FILE__, __LINE__);
    comm = init->comm;
  }
  RESHARD_CUDA_CHECK(cudaSetDevice(device));
  return std::make_unique<NcclCommunicator>(comm, true, options);
}

}  // namespace reshard
