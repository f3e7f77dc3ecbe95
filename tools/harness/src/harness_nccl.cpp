// The NCCL side of the harness: one GPU per rank, in one process (a thread per rank) or one process per rank.
#include <algorithm>

#include "gpu_timing.hpp"
#include "nccl_rank.hpp"
#include "reshard/cuda_check.hpp"
#include "reshard/cuda_device.hpp"
#include "reshard/executor.hpp"
#include "reshard/harness.hpp"
#include "reshard/host_backend.hpp"
#include "reshard/memory_check.hpp"
#include "reshard/nccl_communicator.hpp"
#include "timed_rank.hpp"

namespace reshard {

int local_gpu_count() { return cuda_device_count(); }

Index device_free_bytes(int device) {
  CudaDevice dev(device);
  size_t free = 0, total = 0;
  RESHARD_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return static_cast<Index>(free);
}
bool nccl_available(int n) { return n >= 1 && cuda_device_count() >= n; }

struct NcclRanks {
  std::vector<std::unique_ptr<NcclCommunicator>> comms;
};

NcclRanks* make_nccl_ranks(int n, std::chrono::milliseconds timeout, NcclMode mode) {
  RESHARD_REQUIRE(nccl_available(n), "the nccl backend needs ", n, " GPUs but ", cuda_device_count(), " are visible");
  auto ranks = std::make_unique<NcclRanks>();
  ranks->comms = make_local_communicators(n, NcclOptions{timeout, mode == NcclMode::kNonBlocking});
  return ranks.release();
}

void destroy_nccl_ranks(NcclRanks* ranks) { delete ranks; }

RunResult run_nccl(NcclRanks& ranks, const PlanBatch& batch, const RunOptions& options) {
  const int n = static_cast<int>(ranks.comms.size());
  std::vector<RankOutcome> outcomes(n);
  run_ranks(n, [&](int r) {
    NcclCommunicator& comm = *ranks.comms[r];
    outcomes[r] = detail::aborting_on_failure(
        comm, [&] { return detail::run_timed_rank(batch, comm, r, options, [&] { comm.abort(); }); });
  });
  return combine_ranks(Backend::kNccl, outcomes);
}

struct ProcessRunner::State {
  std::unique_ptr<NcclCommunicator> comm;
};

namespace {

// This process's GPU exists.
void require_device(int rank, int device) {
  const int gpus = local_gpu_count();
  RESHARD_REQUIRE(device >= 0 && device < gpus, "multi-process run: rank ", rank, " needs local GPU ", device,
                  " (LOCAL_RANK) but ", gpus, " GPUs are visible");
}

// `plan` can run as rank `rank` of a job of `world_size` processes on `device` with `options`: its world, its scope,
// the memory.
void require_runnable(const Plan& plan, int rank, int world_size, int device, const RunOptions& options) {
  RESHARD_REQUIRE(world_size == plan.src().mesh().world_size(), "the launcher started ", world_size,
                  " processes but mesh ", plan.src().mesh().str(), " has ", plan.src().mesh().world_size(), " ranks");
  RESHARD_REQUIRE(!plan.scope_rank() || *plan.scope_rank() == rank, "the plan is scoped to rank ", *plan.scope_rank(),
                  " but this process is rank ", rank);
  check_memory(memory_need(plan, Backend::kNccl, rank, buffer_sets(options)), Backend::kNccl, {device});
}

}  // namespace

ProcessRunner::ProcessRunner(int rank, int world_size, int device, const std::string& rendezvous,
                             std::chrono::milliseconds timeout, NcclMode nccl_mode)
    : rank_(rank), world_size_(world_size), device_(device), state_(std::make_unique<State>()) {
  require_device(rank, device);
  state_->comm = make_process_communicator(rank, world_size, device, rendezvous,
                                           NcclOptions{timeout, nccl_mode == NcclMode::kNonBlocking});
}

ProcessRunner::~ProcessRunner() = default;

RunResult ProcessRunner::run(const Plan& plan, const RunOptions& options) {
  require_runnable(plan, rank_, world_size_, device_, options);
  NcclCommunicator& comm = *state_->comm;
  RankOutcome mine = detail::aborting_on_failure(
      comm, [&] { return detail::run_timed_rank(plan, comm, device_, options, [&] { comm.abort(); }); });
  // Combine over processes: sampled iteration times by max (every process kept the same iterations), counts by sum,
  // workspace and issue time by max (on the GPU).
  CudaDevice dev(device_);
  CudaStream stream(device_);
  std::vector<double>& times = mine.times.mutable_values();
  const size_t k = times.size();
  std::vector<double> counts{static_cast<double>(mine.wrong), static_cast<double>(mine.checked),
                             static_cast<double>(mine.workspace), mine.issue_us.value_or(0.0)};
  auto buf = dev.allocate((k + 4) * sizeof(double));
  auto* d = static_cast<double*>(buf->data());
  RESHARD_CUDA_CHECK(cudaMemcpy(d, times.data(), k * sizeof(double), cudaMemcpyHostToDevice));
  RESHARD_CUDA_CHECK(cudaMemcpy(d + k, counts.data(), 4 * sizeof(double), cudaMemcpyHostToDevice));
  comm.all_reduce(d, d, k, DType::kF64, ReduceOp::kMax, stream.handle());
  comm.all_reduce(d + k, d + k, 2, DType::kF64, ReduceOp::kSum, stream.handle());
  comm.all_reduce(d + k + 2, d + k + 2, 2, DType::kF64, ReduceOp::kMax, stream.handle());  // workspace, issue time
  comm.wait(stream.handle(), options.timeout);
  RESHARD_CUDA_CHECK(cudaMemcpy(times.data(), d, k * sizeof(double), cudaMemcpyDeviceToHost));
  RESHARD_CUDA_CHECK(cudaMemcpy(counts.data(), d + k, 4 * sizeof(double), cudaMemcpyDeviceToHost));
  RunResult res;
  res.backend = Backend::kNccl;
  res.ranks = world_size_;
  res.timing = summarize(mine.times);
  res.timing.issue_us = counts[3];
  res.median_us = res.timing.median_us;
  res.wrong_elements = static_cast<Index>(counts[0]);
  res.checked_elements = static_cast<Index>(counts[1]);
  res.workspace_bytes = static_cast<size_t>(counts[2]);
  res.steps = mine.steps;
  return res;
}

RunResult run_plan_process(const Plan& plan, int rank, int world_size, int device, const std::string& rendezvous,
                           const RunOptions& options) {
  // Checked before the communicator: a job that cannot run fails before it bootstraps.
  require_device(rank, device);
  require_runnable(plan, rank, world_size, device, options);
  return ProcessRunner(rank, world_size, device, rendezvous, options.timeout, options.nccl_mode).run(plan, options);
}

LinkMeasurement measure_links(size_t bytes) {
  RESHARD_REQUIRE(cuda_device_count() >= 2, "measuring links needs 2 GPUs; ", cuda_device_count(), " visible");
  LinkMeasurement m;
  m.bytes = bytes;
  constexpr int kReps = 10;
  const auto timeout = std::chrono::seconds(60);
  auto stuck = [] { fail(ErrorKind::kTimeout, "measuring links: a copy made no progress for 60 s"); };
  // Device copy and peer copy.
  {
    CudaDevice d0(0), d1(1);
    CudaStream s0(0);
    auto a = d0.allocate(bytes), b = d0.allocate(bytes), c = d1.allocate(bytes);
    RESHARD_CUDA_CHECK(cudaSetDevice(0));
    int can = 0;
    RESHARD_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, 0, 1));
    if (can) {
      cudaError_t e = cudaDeviceEnablePeerAccess(1, 0);
      if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) RESHARD_CUDA_CHECK(e);
      cudaGetLastError();
    }
    auto time = [&](auto op) {
      op();  // warm-up
      return summarize(detail::time_on_stream(s0.get(), kReps, op, timeout, stuck)).median_us;
    };
    double copy_us = time(
        [&] { RESHARD_CUDA_CHECK(cudaMemcpyAsync(b->data(), a->data(), bytes, cudaMemcpyDeviceToDevice, s0.get())); });
    double peer_us =
        time([&] { RESHARD_CUDA_CHECK(cudaMemcpyPeerAsync(c->data(), 1, a->data(), 0, bytes, s0.get())); });
    m.device_copy_GBps = bytes / (copy_us * 1e3);
    m.peer_copy_GBps = bytes / (peer_us * 1e3);
  }
  // NCCL send/recv, both directions at once.
  auto comms = make_local_communicators(2, NcclOptions{});
  std::vector<double> us(2, 0);
  run_ranks(2, [&](int r) {
    CudaDevice dev(r);
    CudaStream s(r);
    auto send = dev.allocate(bytes), recv = dev.allocate(bytes);
    SendOp so{1 - r, send->data(), bytes};
    RecvOp ro{1 - r, recv->data(), bytes};
    auto exchange = [&] {
      comms[r]->exchange(std::span<const SendOp>(&so, 1), std::span<const RecvOp>(&ro, 1), s.handle());
    };
    exchange();  // warm-up
    us[r] = summarize(detail::time_on_stream(s.get(), kReps, exchange, timeout, [&] {
              comms[r]->abort();
              stuck();
            })).median_us;
    comms[r]->wait(s.handle(), timeout);
  });
  m.nccl_p2p_GBps = bytes / (std::max(us[0], us[1]) * 1e3);
  return m;
}

}  // namespace reshard
