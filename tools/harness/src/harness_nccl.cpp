// The NCCL side of the harness: one GPU per rank, in one process (a thread per rank) or one process per rank.
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "reshard/cuda_check.hpp"
#include "reshard/cuda_device.hpp"
#include "reshard/cuda_pattern.hpp"
#include "reshard/executor.hpp"
#include "reshard/harness.hpp"
#include "reshard/host_backend.hpp"
#include "reshard/nccl_communicator.hpp"
#include "reshard/pattern.hpp"

namespace reshard {
namespace {

struct RankOutcome {
  std::vector<StepTime> steps;
  std::vector<double> times;
  Index wrong = 0, checked = 0;
  size_t workspace = 0;
};

// Owns a captured CUDA graph and its executable instance.
class CudaGraph {
 public:
  ~CudaGraph() {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
  }
  template <class F>
  void capture(cudaStream_t stream, F work) {
    RESHARD_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    work();
    RESHARD_CUDA_CHECK(cudaStreamEndCapture(stream, &graph_));
    RESHARD_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
  }
  void launch(cudaStream_t stream) { RESHARD_CUDA_CHECK(cudaGraphLaunch(exec_, stream)); }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

RankOutcome run_rank(const Plan& plan, Communicator& comm, int device_ordinal, const RunOptions& options) {
  const int r = comm.rank();
  const Dims& shape = plan.src().global_shape();
  CudaDevice device(device_ordinal);
  CudaStream stream(device_ordinal);
  CudaPatternChecker pattern(device);
  Executor exec(plan, comm, device, ExecutorOptions{options.timeout, options.trace, options.stage_overlap});
  auto fault = [&](RunOptions::FaultPoint point) {
    if (options.fault_point == point && options.fault_rank == r) {
      std::fprintf(stderr, "rank %d: injected fault, exiting\n", r);
      std::_Exit(3);
    }
  };
  fault(RunOptions::FaultPoint::kAfterPrepare);
  RankOutcome out;
  out.workspace = exec.workspace_bytes();
  Box in_box = plan.src().box(r), out_box = plan.dst().box(r);
  auto input = device.allocate(exec.input_bytes());
  auto output = device.allocate(exec.output_bytes());
  // Partial layouts: contributions and expected values are made on the host (pattern.hpp); otherwise on the GPU.
  const bool partial = plan.src().has_partial() || plan.dst().has_partial();
  if (partial) {
    std::vector<unsigned char> host(input->bytes());
    fill_local(host.data(), plan.src(), r, plan.dtype());
    if (!host.empty()) RESHARD_CUDA_CHECK(cudaMemcpy(input->data(), host.data(), host.size(), cudaMemcpyHostToDevice));
  } else {
    pattern.fill(input->data(), in_box, shape, plan.dtype(), stream.get());
  }
  auto run = [&] { exec.run({input->data(), input->bytes()}, {output->data(), output->bytes()}, stream.handle()); };
  auto verify = [&] {
    exec.wait(stream.handle());
    if (partial) {
      std::vector<unsigned char> host(output->bytes());
      if (!host.empty())
        RESHARD_CUDA_CHECK(cudaMemcpy(host.data(), output->data(), host.size(), cudaMemcpyDeviceToHost));
      out.wrong += count_local_mismatches(host.data(), plan.src(), plan.dst(), r, plan.dtype());
    } else {
      out.wrong += pattern.count_mismatches(output->data(), out_box, shape, plan.dtype(), stream.get());
    }
    out.checked += volume(out_box);
  };
  for (int poison : {0xA5, 0x5A}) {
    if (output->bytes()) RESHARD_CUDA_CHECK(cudaMemsetAsync(output->data(), poison, output->bytes(), stream.get()));
    run();
    verify();
  }
  fault(RunOptions::FaultPoint::kMidRun);
  for (int i = 0; i < options.warmup; ++i) run();
  exec.wait(stream.handle());
  CudaGraph graph;
  if (options.cuda_graph) {
    graph.capture(stream.get(), run);
    graph.launch(stream.get());
    exec.wait(stream.handle());
  }
  std::vector<std::unique_ptr<CudaEvent>> events;
  for (int i = 0; i <= options.iters; ++i) events.push_back(std::make_unique<CudaEvent>());
  events[0]->record(stream.get());
  for (int i = 0; i < options.iters; ++i) {
    if (options.cuda_graph)
      graph.launch(stream.get());
    else
      run();
    events[i + 1]->record(stream.get());
  }
  exec.wait(stream.handle());
  for (int i = 0; i < options.iters; ++i) out.times.push_back(1000.0 * events[i + 1]->elapsed_ms_since(*events[i]));
  verify();
  if (options.trace) {
    run();
    exec.wait(stream.handle());
    out.steps = exec.step_times();
  }
  return out;
}

RunResult combine(const std::vector<RankOutcome>& ranks, int iters) {
  RunResult res;
  res.backend = Backend::kNccl;
  res.ranks = static_cast<int>(ranks.size());
  for (int i = 0; i < iters; ++i) {
    double worst = 0;
    for (const RankOutcome& o : ranks) worst = std::max(worst, o.times[i]);
    res.iteration_us.push_back(worst);
  }
  res.median_us = median(res.iteration_us);
  std::vector<std::vector<StepTime>> traces;
  for (const RankOutcome& o : ranks) traces.push_back(o.steps);
  res.steps = slowest(traces);
  for (const RankOutcome& o : ranks) {
    res.wrong_elements += o.wrong;
    res.checked_elements += o.checked;
    res.workspace_bytes = std::max(res.workspace_bytes, o.workspace);
  }
  return res;
}

}  // namespace

int local_gpu_count() { return cuda_device_count(); }
bool nccl_available(int n) { return n >= 1 && cuda_device_count() >= n; }

struct NcclRanks {
  std::vector<std::unique_ptr<NcclCommunicator>> comms;
};

NcclRanks* make_nccl_ranks(int n, std::chrono::milliseconds timeout, bool blocking) {
  RESHARD_REQUIRE(nccl_available(n), "the nccl backend needs ", n, " GPUs but ", cuda_device_count(), " are visible");
  auto ranks = std::make_unique<NcclRanks>();
  ranks->comms = make_local_communicators(n, NcclOptions{timeout, !blocking});
  return ranks.release();
}

void destroy_nccl_ranks(NcclRanks* ranks) { delete ranks; }

RunResult run_nccl(NcclRanks& ranks, const Plan& plan, const RunOptions& options) {
  const int n = static_cast<int>(ranks.comms.size());
  std::vector<RankOutcome> outcomes(n);
  run_ranks(n, [&](int r) { outcomes[r] = run_rank(plan, *ranks.comms[r], r, options); });
  return combine(outcomes, options.iters);
}

RunResult run_plan_process(const Plan& plan, int rank, int world_size, int device, const std::string& rendezvous,
                           const RunOptions& options) {
  RESHARD_REQUIRE(world_size == plan.src().mesh().size(), "the launcher started ", world_size, " processes but mesh ",
                  plan.src().mesh().str(), " has ", plan.src().mesh().size(), " ranks");
  auto comm = make_process_communicator(rank, world_size, device, rendezvous,
                                        NcclOptions{options.timeout, !options.nccl_blocking});
  RankOutcome mine = run_rank(plan, *comm, device, options);
  // Combine over processes: iteration times by max, counts by sum (one all_reduce each, on the GPU).
  CudaDevice dev(device);
  CudaStream stream(device);
  const size_t k = mine.times.size();
  std::vector<double> times = mine.times;
  std::vector<double> counts{static_cast<double>(mine.wrong), static_cast<double>(mine.checked),
                             static_cast<double>(mine.workspace)};
  auto buf = dev.allocate((k + 3) * sizeof(double));
  auto* d = static_cast<double*>(buf->data());
  RESHARD_CUDA_CHECK(cudaMemcpy(d, times.data(), k * sizeof(double), cudaMemcpyHostToDevice));
  RESHARD_CUDA_CHECK(cudaMemcpy(d + k, counts.data(), 3 * sizeof(double), cudaMemcpyHostToDevice));
  comm->all_reduce(d, d, k, DType::kF64, ReduceOp::kMax, stream.handle());
  comm->all_reduce(d + k, d + k, 2, DType::kF64, ReduceOp::kSum, stream.handle());
  comm->all_reduce(d + k + 2, d + k + 2, 1, DType::kF64, ReduceOp::kMax, stream.handle());
  comm->wait(stream.handle(), options.timeout);
  RESHARD_CUDA_CHECK(cudaMemcpy(times.data(), d, k * sizeof(double), cudaMemcpyDeviceToHost));
  RESHARD_CUDA_CHECK(cudaMemcpy(counts.data(), d + k, 3 * sizeof(double), cudaMemcpyDeviceToHost));
  RunResult res;
  res.backend = Backend::kNccl;
  res.ranks = world_size;
  res.iteration_us = times;
  res.median_us = median(times);
  res.wrong_elements = static_cast<Index>(counts[0]);
  res.checked_elements = static_cast<Index>(counts[1]);
  res.workspace_bytes = static_cast<size_t>(counts[2]);
  return res;
}

LinkMeasurement measure_links(size_t bytes) {
  RESHARD_REQUIRE(cuda_device_count() >= 2, "measuring links needs 2 GPUs; ", cuda_device_count(), " visible");
  LinkMeasurement m;
  m.bytes = bytes;
  constexpr int kReps = 10;
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
      std::vector<double> ms;
      op();
      for (int i = 0; i < kReps; ++i) {
        CudaEvent start, stop;
        start.record(s0.get());
        op();
        stop.record(s0.get());
        s0.synchronize();
        ms.push_back(stop.elapsed_ms_since(start));
      }
      return median(ms);
    };
    double copy_ms = time(
        [&] { RESHARD_CUDA_CHECK(cudaMemcpyAsync(b->data(), a->data(), bytes, cudaMemcpyDeviceToDevice, s0.get())); });
    double peer_ms =
        time([&] { RESHARD_CUDA_CHECK(cudaMemcpyPeerAsync(c->data(), 1, a->data(), 0, bytes, s0.get())); });
    m.device_copy_GBps = bytes / (copy_ms * 1e6);
    m.peer_copy_GBps = bytes / (peer_ms * 1e6);
  }
  // NCCL send/recv, both directions at once.
  auto comms = make_local_communicators(2, NcclOptions{});
  std::vector<double> ms(2, 0);
  run_ranks(2, [&](int r) {
    CudaDevice dev(r);
    CudaStream s(r);
    auto send = dev.allocate(bytes), recv = dev.allocate(bytes);
    SendOp so{1 - r, send->data(), bytes};
    RecvOp ro{1 - r, recv->data(), bytes};
    std::vector<double> t;
    for (int i = 0; i <= kReps; ++i) {
      CudaEvent start, stop;
      start.record(s.get());
      comms[r]->exchange(std::span<const SendOp>(&so, 1), std::span<const RecvOp>(&ro, 1), s.handle());
      stop.record(s.get());
      comms[r]->wait(s.handle(), std::chrono::seconds(60));
      if (i > 0) t.push_back(stop.elapsed_ms_since(start));
    }
    ms[r] = median(t);
  });
  m.nccl_p2p_GBps = bytes / (std::max(ms[0], ms[1]) * 1e6);
  return m;
}

}  // namespace reshard
