// The contention measurement on GPUs (gemm_contention.hpp): one thread per rank, a cuBLAS GEMM loop on a second stream
// of every GPU beside the redistribution on the executor's stream.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cublas_api.hpp"
#include "gpu_timing.hpp"
#include "nccl_rank.hpp"
#include "reshard/checked_math.hpp"
#include "reshard/cuda_check.hpp"
#include "reshard/gemm_contention.hpp"
#include "reshard/harness.hpp"
#include "reshard/host_backend.hpp"
#include "reshard/interrupt.hpp"
#include "reshard/memory_check.hpp"
#include "reshard/plan_format.hpp"
#include "stream_graph.hpp"

namespace reshard {
namespace {

// cuBLAS's workspace, given to it (cublasSetWorkspace) so that it allocates nothing while a GEMM is captured into a
// CUDA graph: 32 MiB, the size cuBLAS documents for Hopper.
constexpr Index kCublasWorkspaceBytes = Index(32) << 20;
// What cuBLAS may take beyond the operands: that workspace, its handle and its kernels' module data.
constexpr Index kCublasReserveBytes = Index(128) << 20;
// Redistributions timed alone to size the loop of phase 3.
constexpr int kCalibrationRuns = 5;

class CublasHandle {
 public:
  CublasHandle() { RESHARD_CUBLAS_CHECK(detail::cublas_api().create(&handle_)); }
  ~CublasHandle() { detail::cublas_api().destroy(handle_); }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

cudaDataType cuda_type(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return CUDA_R_16BF;
    case DType::kF16:
      return CUDA_R_16F;
    case DType::kF32:
      return CUDA_R_32F;
    default:
      fail(ErrorKind::kInvalidArgument, cat("the GEMM dtype must be bf16, f16 or f32, got ", to_string(dtype)));
  }
}

// One GPU's GEMM: its operands (A and B hold the test pattern: hashed small integers, not zeros, so that the GEMM
// draws the power real data does), a cuBLAS handle bound to its own non-blocking stream, and C = alpha A B with
// alpha chosen so that |C| <= 1 whatever the dtype.
class GemmLoop {
 public:
  GemmLoop(CudaDevice& device, const GemmSpec& spec) : spec_(spec), stream_(device.ordinal()) {
    const Index es = element_size(spec.dtype);
    a_ = device.allocate(static_cast<size_t>(checked_mul(spec.m, spec.k, es, "GEMM A bytes")));
    b_ = device.allocate(static_cast<size_t>(checked_mul(spec.k, spec.n, es, "GEMM B bytes")));
    c_ = device.allocate(static_cast<size_t>(checked_mul(spec.m, spec.n, es, "GEMM C bytes")));
    CudaPatternChecker pattern(device);
    pattern.fill(a_->data(), whole(Dims{spec.m, spec.k}), Dims{spec.m, spec.k}, spec.dtype, stream_.get());
    pattern.fill(b_->data(), whole(Dims{spec.k, spec.n}), Dims{spec.k, spec.n}, spec.dtype, stream_.get());
    RESHARD_CUDA_CHECK(cudaMemsetAsync(c_->data(), 0, c_->bytes(), stream_.get()));
    stream_.synchronize();
    // The pattern's largest magnitude per dtype (detail/pattern_bits.hpp): 127 (bf16), 1023 (f16), 2^23 (f32).
    const double vmax = spec.dtype == DType::kBF16 ? 127.0 : spec.dtype == DType::kF16 ? 1023.0 : 8388608.0;
    alpha_ = static_cast<float>(1.0 / (static_cast<double>(spec.k) * vmax * vmax));
    RESHARD_CUBLAS_CHECK(detail::cublas_api().set_stream(handle_.get(), stream_.get()));
    workspace_ = device.allocate(static_cast<size_t>(kCublasWorkspaceBytes));
    RESHARD_CUBLAS_CHECK(detail::cublas_api().set_workspace(handle_.get(), workspace_->data(), workspace_->bytes()));
  }

  cudaStream_t stream() const { return stream_.get(); }

  // Enqueues one GEMM on stream().
  void enqueue() {
    const cudaDataType t = cuda_type(spec_.dtype);
    const int m = static_cast<int>(spec_.m), n = static_cast<int>(spec_.n), k = static_cast<int>(spec_.k);
    RESHARD_CUBLAS_CHECK(detail::cublas_api().gemm_ex(handle_.get(), CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha_,
                                                      a_->data(), t, m, b_->data(), t, k, &beta_, c_->data(), t, m,
                                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }

 private:
  GemmSpec spec_;
  CudaStream stream_;
  CublasHandle handle_;
  std::unique_ptr<DeviceMemory> a_, b_, c_, workspace_;
  float alpha_ = 1, beta_ = 0;
};

// Per repeat, this rank's figures (microseconds per GEMM / per redistribution, and phase 3's loop spans).
struct RankSamples {
  std::vector<double> gemm_alone, gemm_beside, redistribution_alone, redistribution_beside;
  std::vector<double> gemm_loop_beside, redistribution_loop_beside;
  Index wrong = 0, checked = 0;
  size_t workspace = 0;
};

// One rank's measurement of one plan; `gemm` and `sync` (8 bytes of device memory) are the rank's own, kept over
// the plans.
class RankContention {
 public:
  RankContention(const Plan& plan, NcclCommunicator& comm, CudaDevice& device, GemmLoop& gemm, DeviceMemory& sync,
                 const ContentionOptions& options)
      : comm_(comm),
        gemm_(gemm),
        sync_(sync),
        options_(options),
        redistribution_(plan, comm, device, ExecutorOptions{options.timeout, false, StageSchedule::kLanes}) {}

  RankSamples measure() {
    RankSamples out;
    out.workspace = redistribution_.workspace_bytes();
    for (int poison : {0xA5, 0x5A}) {  // as every harness run starts: an element no step writes fails one of the two
      redistribution_.poison(poison);
      redistribution_.run();
      verify(out);
    }
    gemm_.enqueue();  // cuBLAS loads its kernels on first use: never in a timed loop
    for (int i = 0; i < options_.warmup; ++i) {
      throw_if_stop_requested();
      redistribution_.run();
      gemm_.enqueue();
    }
    redistribution_.wait();
    wait_gemms_done();
    if (options_.cuda_graph) capture_graphs(out);
    const int g = options_.gemms;
    barrier();
    const double gemm_loop_us = time_gemms(g);
    barrier();
    const double redistribution_us = time_redistributions(kCalibrationRuns) / kCalibrationRuns;
    double wanted = std::ceil(gemm_loop_us / std::max(redistribution_us, 1e-3));
    wanted = std::clamp(wanted, 1.0, static_cast<double>(kMaxRedistributionsPerLoop));
    const int r = static_cast<int>(agree_max(wanted));  // every rank must run the same number
    for (int rep = 0; rep < options_.repeats; ++rep) {
      barrier();
      out.gemm_alone.push_back(time_gemms(g) / g);
      barrier();
      out.redistribution_alone.push_back(time_redistributions(r) / r);
      redistribution_.poison(rep % 2 ? 0xA5 : 0x5A);
      barrier();
      auto [gemm_span, redistribution_span] = time_both(g, r);
      out.gemm_loop_beside.push_back(gemm_span);
      out.redistribution_loop_beside.push_back(redistribution_span);
      out.gemm_beside.push_back(gemm_span / g);
      out.redistribution_beside.push_back(redistribution_span / r);
      verify(out);
    }
    redistributions_per_loop_ = r;
    return out;
  }
  int redistributions_per_loop() const { return redistributions_per_loop_; }

 private:
  // CUDA-graph mode: one redistribution and one GEMM, each captured on its stream into its own graph; every timed
  // phase then replays the graphs instead of enqueueing the work. The redistribution's graph is verified once
  // (poisoned target, one replay) before anything is timed, and again after every phase 3 as in eager mode.
  void capture_graphs(RankSamples& out) {
    gemm_graph_.capture(gemm_.stream(), [this] { gemm_.enqueue(); });
    run_graph_.capture(redistribution_.stream(), [this] { redistribution_.run(); });
    redistribution_.poison(0xA5);
    run_graph_.launch(redistribution_.stream());
    verify(out);
    gemm_graph_.launch(gemm_.stream());
    wait_gemms_done();
  }
  // One GEMM / one redistribution on its stream: replayed from its graph in CUDA-graph mode, enqueued otherwise.
  void gemm() {
    if (gemm_graph_.captured())
      gemm_graph_.launch(gemm_.stream());
    else
      gemm_.enqueue();
  }
  void redistribute() {
    if (run_graph_.captured())
      run_graph_.launch(redistribution_.stream());
    else
      redistribution_.run();
  }
  [[noreturn]] void stalled() {
    comm_.abort();
    fail(ErrorKind::kTimeout,
         cat("rank ", comm_.rank(), ": the contention measurement made no progress for ", options_.timeout.count(),
             " ms (a peer stopped or died?); the NCCL communicator was aborted"));
  }
  void wait_event(const CudaEvent& event) {
    detail::wait_event(event, options_.timeout, [this] { stalled(); });
  }
  void wait_gemms_done() {
    CudaEvent done(false);
    done.record(gemm_.stream());
    wait_event(done);
  }
  void verify(RankSamples& out) {
    out.wrong += redistribution_.count_wrong();
    out.checked += redistribution_.target_elements();
  }
  // The largest of every rank's `value` (a one-element all-reduce on the executor's stream, waited for).
  double agree_max(double value) {
    auto* d = static_cast<double*>(sync_.data());
    const cudaStream_t stream = redistribution_.stream();
    RESHARD_CUDA_CHECK(cudaMemcpyAsync(d, &value, sizeof value, cudaMemcpyHostToDevice, stream));
    comm_.all_reduce(d, d, 1, DType::kF64, ReduceOp::kMax, stream);
    comm_.wait(stream, options_.timeout);
    RESHARD_CUDA_CHECK(cudaMemcpyAsync(&value, d, sizeof value, cudaMemcpyDeviceToHost, stream));
    RESHARD_CUDA_CHECK(cudaStreamSynchronize(stream));
    return value;
  }
  // Returns when every rank got here and its GPU is idle (each phase ends with its streams waited for).
  void barrier() {
    throw_if_stop_requested();
    agree_max(0);
  }
  // Microseconds of `count` GEMMs back to back.
  double time_gemms(int count) {
    CudaEvent start, stop;
    start.record(gemm_.stream());
    for (int i = 0; i < count; ++i) gemm();
    stop.record(gemm_.stream());
    wait_event(stop);
    return 1000.0 * stop.elapsed_ms_since(start);
  }
  // Microseconds of `count` redistributions back to back.
  double time_redistributions(int count) {
    CudaEvent start, stop;
    start.record(redistribution_.stream());
    for (int i = 0; i < count; ++i) redistribute();
    stop.record(redistribution_.stream());
    redistribution_.wait();
    wait_event(stop);
    return 1000.0 * stop.elapsed_ms_since(start);
  }
  // Phase 3: `gemms` GEMMs and `runs` redistributions at once, enqueued interleaved in proportion (the i-th GEMM
  // after the first i * runs / gemms redistributions); microseconds of each stream's loop.
  std::pair<double, double> time_both(int gemms, int runs) {
    CudaEvent gemm_start, gemm_stop, run_start, run_stop;
    gemm_start.record(gemm_.stream());
    run_start.record(redistribution_.stream());
    long long g = 0, r = 0;
    while (g < gemms || r < runs) {
      if (r >= runs || (g < gemms && g * runs <= r * gemms)) {
        gemm();
        ++g;
      } else {
        redistribute();
        ++r;
      }
    }
    gemm_stop.record(gemm_.stream());
    run_stop.record(redistribution_.stream());
    redistribution_.wait();
    wait_event(run_stop);
    wait_event(gemm_stop);
    return {1000.0 * gemm_stop.elapsed_ms_since(gemm_start), 1000.0 * run_stop.elapsed_ms_since(run_start)};
  }

  NcclCommunicator& comm_;
  GemmLoop& gemm_;
  DeviceMemory& sync_;
  const ContentionOptions& options_;
  detail::RankRedistribution redistribution_;
  // Declared after what they replay, so that they are destroyed first.
  detail::StreamGraph gemm_graph_, run_graph_;
  int redistributions_per_loop_ = 0;
};

// Per repeat the slowest rank's figure, then the median over the repeats.
std::vector<double> slowest(const std::vector<RankSamples>& ranks, std::vector<double> RankSamples::*figure) {
  std::vector<double> out = ranks.at(0).*figure;
  for (const RankSamples& s : ranks)
    for (size_t i = 0; i < out.size() && i < (s.*figure).size(); ++i) out[i] = std::max(out[i], (s.*figure)[i]);
  return out;
}

ContentionResult combine(const std::vector<RankSamples>& ranks, int redistributions_per_loop,
                         const ContentionOptions& options) {
  ContentionResult res;
  res.ranks = static_cast<int>(ranks.size());
  res.gemm = options.gemm;
  res.gemms_per_loop = options.gemms;
  res.redistributions_per_loop = redistributions_per_loop;
  res.repeats = options.repeats;
  res.cuda_graph = options.cuda_graph;
  res.gemm_alone_samples = slowest(ranks, &RankSamples::gemm_alone);
  res.gemm_beside_samples = slowest(ranks, &RankSamples::gemm_beside);
  res.redistribution_alone_samples = slowest(ranks, &RankSamples::redistribution_alone);
  res.redistribution_beside_samples = slowest(ranks, &RankSamples::redistribution_beside);
  res.gemm_alone_us = median(res.gemm_alone_samples);
  res.gemm_beside_us = median(res.gemm_beside_samples);
  res.redistribution_alone_us = median(res.redistribution_alone_samples);
  res.redistribution_beside_us = median(res.redistribution_beside_samples);
  res.gemm_slowdown = res.gemm_alone_us > 0 ? res.gemm_beside_us / res.gemm_alone_us - 1 : 0;
  res.redistribution_slowdown =
      res.redistribution_alone_us > 0 ? res.redistribution_beside_us / res.redistribution_alone_us - 1 : 0;
  res.gemm_loop_beside_us = median(slowest(ranks, &RankSamples::gemm_loop_beside));
  res.redistribution_loop_beside_us = median(slowest(ranks, &RankSamples::redistribution_loop_beside));
  for (const RankSamples& s : ranks) {
    res.wrong_elements += s.wrong;
    res.checked_elements += s.checked;
    res.workspace_bytes = std::max(res.workspace_bytes, s.workspace);
  }
  return res;
}

// Every GPU's need for `plan` beside the GEMM, checked before anything is allocated.
void check_contention_memory(const Plan& plan, const ContentionOptions& options) {
  MemoryNeed need = memory_need(plan, Backend::kNccl);
  const Index gemm = gemm_operand_bytes(options.gemm);
  need.device_bytes = checked_add(checked_add(need.device_bytes, gemm, "the memory this run needs"),
                                  kCublasReserveBytes, "the memory this run needs");
  need.device_detail += cat(" + GEMM operands ", human_bytes(static_cast<double>(gemm)), " + cuBLAS reserve ",
                            human_bytes(static_cast<double>(kCublasReserveBytes)));
  std::vector<int> devices;
  for (int d = 0; d < plan.src().mesh().world_size(); ++d) devices.push_back(d);
  check_memory(need, Backend::kNccl, devices);
}

}  // namespace

std::vector<ContentionResult> run_contention(const std::vector<Plan>& plans, const ContentionOptions& options) {
  check_contention_options(options);
  RESHARD_REQUIRE(!plans.empty(), "an contention measurement needs at least one plan");
  const int n = plans.front().src().mesh().world_size();
  for (const Plan& plan : plans) {
    RESHARD_REQUIRE(!plan.scope_rank(), "the plan is scoped to rank ", *plan.scope_rank(),
                    "; running every rank in one process needs the global plan");
    RESHARD_REQUIRE(plan.src().mesh().world_size() == n,
                    "the plans of one contention measurement must have the same number of "
                    "ranks: ",
                    n, " and ", plan.src().mesh().world_size());
  }
  const int gpus = local_gpu_count();
  RESHARD_REQUIRE(gpus >= n, "measuring a redistribution beside GEMMs needs ", n, " GPUs (one per rank of mesh ",
                  plans.front().src().mesh().str(), ") but ", gpus, " are visible");
  detail::cublas_api();  // loaded now, so that a missing cuBLAS is reported before anything starts
  for (const Plan& plan : plans) check_contention_memory(plan, options);

  auto comms = make_local_communicators(n, NcclOptions{options.timeout, true});
  std::vector<std::vector<RankSamples>> samples(plans.size(), std::vector<RankSamples>(n));
  std::vector<int> per_loop(plans.size(), 0);
  run_ranks(n, [&](int r) {
    NcclCommunicator& comm = *comms[r];
    detail::aborting_on_failure(comm, [&] {
      CudaDevice device(r);
      auto sync = device.allocate(sizeof(double));
      GemmLoop gemm(device, options.gemm);
      for (size_t p = 0; p < plans.size(); ++p) {
        RankContention rank(plans[p], comm, device, gemm, *sync, options);
        samples[p][r] = rank.measure();
        if (r == 0) per_loop[p] = rank.redistributions_per_loop();
      }
    });
  });
  std::vector<ContentionResult> results;
  for (size_t p = 0; p < plans.size(); ++p) results.push_back(combine(samples[p], per_loop[p], options));
  return results;
}

}  // namespace reshard
