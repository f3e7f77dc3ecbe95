// Ranks that share GPUs, in one process and without NCCL (NCCL refuses two ranks on one GPU): a thread per rank, rank r
// on visible GPU r % count. The communicator carries only host-side exchanges (how the one-sided transport connects),
// so only plans whose communicating steps are all one-sided run: the NVLink transport's ordering, copies and fused
// kernels tested with more ranks than GPUs.
#include <algorithm>
#include <chrono>
#include <limits>
#include <thread>
#include <vector>

#include "reshard/cuda_check.hpp"
#include "reshard/harness.hpp"
#include "reshard/host_backend.hpp"
#include "reshard/memory_check.hpp"
#include "timed_rank.hpp"

namespace reshard {
namespace {

class OneSidedCommunicator : public Communicator {
 public:
  OneSidedCommunicator(HostWorld& world, int rank) : host_(world, rank) {}
  int rank() const override { return host_.rank(); }
  int size() const override { return host_.size(); }
  void exchange(std::span<const SendOp>, std::span<const RecvOp>, StreamHandle) override { refuse("an exchange"); }
  void all_gather(const void*, void*, size_t, StreamHandle) override { refuse("an all_gather"); }
  void reduce_scatter(const void*, void*, size_t, DType, ReduceOp, StreamHandle) override {
    refuse("a reduce_scatter");
  }
  void all_reduce(const void*, void*, size_t, DType, ReduceOp, StreamHandle) override { refuse("an all_reduce"); }
  Communicator& group(const Mesh&, const std::vector<int>&) override { refuse("a group communicator"); }
  void all_gather_host(const void* send, void* recv, size_t bytes) override {
    host_.all_gather_host(send, recv, bytes);
  }
  // Polls the stream (the one-sided transport's waits are on the GPU) until it drains or `timeout` passes.
  void wait(StreamHandle stream, std::chrono::milliseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    auto s = static_cast<cudaStream_t>(stream);
    while (true) {
      const cudaError_t q = cudaStreamQuery(s);
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) RESHARD_CUDA_CHECK(q);
      if (std::chrono::steady_clock::now() > deadline)
        fail(ErrorKind::kTimeout, cat("rank ", rank(), ": the redistribution did not finish within ", timeout.count(),
                                      " ms (a peer never posted its part?)"));
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

 private:
  [[noreturn]] static void refuse(const char* what) {
    fail(ErrorKind::kInvalidArgument,
         cat("ranks sharing GPUs run only one-sided steps, but the executor asked for ", what, " (NCCL's part)"));
  }
  HostCommunicator host_;
};

}  // namespace

RunResult run_shared_gpus(const Plan& plan, const RunOptions& options) {
  const int gpus = local_gpu_count();
  RESHARD_REQUIRE(gpus >= 1, "ranks sharing GPUs need a GPU; none is visible");
  for (size_t i = 0; i < plan.steps().size(); ++i) {
    const Step& s = plan.steps()[i];
    RESHARD_REQUIRE(s.kind == StepKind::kLocal || (s.kind == StepKind::kP2P && s.transport == Transport::kNvlink),
                    "ranks sharing GPUs run only one-sided plans (every communicating step p2p on nvlink); step ", i,
                    " is ", to_string(s.kind), " on ", to_string(s.transport));
  }
  const int n = plan.src().mesh().world_size();
  RESHARD_REQUIRE(n <= kMaxHostRanks, "ranks sharing GPUs are threads: at most ", kMaxHostRanks, ", not ", n);
  MemoryNeed need = memory_need(plan, Backend::kNccl, std::nullopt, buffer_sets(options));
  const Index per_gpu = (n + gpus - 1) / gpus;
  RESHARD_REQUIRE(need.device_bytes <= std::numeric_limits<Index>::max() / per_gpu, "ranks sharing GPUs: ", per_gpu,
                  " ranks per GPU need more memory than can be counted");
  need.device_bytes *= per_gpu;
  need.device_detail = cat(per_gpu, " ranks x (", need.device_detail, ")");
  std::vector<int> devices;
  for (int g = 0; g < std::min(gpus, n); ++g) devices.push_back(g);
  check_memory(need, Backend::kNccl, devices);

  HostWorld world(n, HostWorldOptions{options.timeout});
  std::vector<RankOutcome> outcomes(n);
  run_ranks(
      n,
      [&](int r) {
        OneSidedCommunicator comm(world, r);
        auto meet = [&] {
          char none = 0;
          std::vector<char> all(n);
          comm.all_gather_host(&none, all.data(), 1);
        };
        outcomes[r] = detail::run_timed_rank(
            plan, comm, r % gpus, options, [&] { world.abort(cat("rank ", r, " stalled")); }, meet, meet);
      },
      &world);
  return combine_ranks(Backend::kNccl, outcomes);
}

}  // namespace reshard
