#include <algorithm>
#include <cstring>

#include "reshard/executor.hpp"
#include "reshard/harness.hpp"
#include "reshard/host_backend.hpp"
#include "reshard/pattern.hpp"

namespace reshard {

std::string_view to_string(Backend b) { return b == Backend::kHost ? "host" : "nccl"; }

std::vector<StepTime> slowest(const std::vector<std::vector<StepTime>>& per_rank) {
  std::vector<StepTime> out;
  for (const auto& rank : per_rank) {
    if (out.size() < rank.size()) out.resize(rank.size());
    for (size_t i = 0; i < rank.size(); ++i) {
      out[i].pack_us = std::max(out[i].pack_us, rank[i].pack_us);
      out[i].comm_us = std::max(out[i].comm_us, rank[i].comm_us);
      out[i].unpack_us = std::max(out[i].unpack_us, rank[i].unpack_us);
      out[i].total_us = std::max(out[i].total_us, rank[i].total_us);
      out[i].pipelined = out[i].pipelined || rank[i].pipelined;
    }
  }
  return out;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

namespace {

using Clock = std::chrono::steady_clock;

RunResult run_host(const Plan& plan, const RunOptions& options) {
  const int n = plan.src().mesh().size();
  HostWorld world(n, HostWorldOptions{options.timeout});
  std::vector<std::vector<double>> times(n);
  std::vector<Index> wrong(n, 0), checked(n, 0);
  std::vector<size_t> workspace(n, 0);
  std::vector<std::vector<StepTime>> traces(n);
  run_ranks(
      n,
      [&](int r) {
        HostCommunicator comm(world, r);
        HostDevice device;
        Executor exec(plan, comm, device, ExecutorOptions{options.timeout, options.trace, options.stage_overlap});
        workspace[r] = exec.workspace_bytes();
        const Box out_box = plan.dst().box(r);
        std::vector<std::byte> input(exec.input_bytes()), output(exec.output_bytes());
        fill_local(input.data(), plan.src(), r, plan.dtype());
        auto run = [&] { exec.run({input.data(), input.size()}, {output.data(), output.size()}, nullptr); };
        auto verify = [&] {
          wrong[r] += count_local_mismatches(output.data(), plan.src(), plan.dst(), r, plan.dtype());
          checked[r] += volume(out_box);
        };
        for (int poison : {0xA5, 0x5A}) {
          if (!output.empty()) std::memset(output.data(), poison, output.size());
          run();
          verify();
        }
        for (int i = 0; i < options.warmup; ++i) run();
        for (int i = 0; i < options.iters; ++i) {
          auto t0 = Clock::now();
          run();
          times[r].push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
        }
        verify();
        if (options.trace) {
          run();
          traces[r] = exec.step_times();
        }
      },
      &world);
  RunResult res;
  res.backend = Backend::kHost;
  res.ranks = n;
  for (int i = 0; i < options.iters; ++i) {
    double worst = 0;
    for (int r = 0; r < n; ++r) worst = std::max(worst, times[r][i]);
    res.iteration_us.push_back(worst);
  }
  res.median_us = median(res.iteration_us);
  res.steps = slowest(traces);
  for (int r = 0; r < n; ++r) {
    res.wrong_elements += wrong[r];
    res.checked_elements += checked[r];
    res.workspace_bytes = std::max(res.workspace_bytes, workspace[r]);
  }
  return res;
}

}  // namespace

// The NCCL side lives in harness_nccl.cpp (CUDA builds) or harness_nohw.cpp.
struct NcclRanks;
NcclRanks* make_nccl_ranks(int n, std::chrono::milliseconds timeout, bool blocking);  // free: destroy_nccl_ranks
void destroy_nccl_ranks(NcclRanks* ranks);
RunResult run_nccl(NcclRanks& ranks, const Plan& plan, const RunOptions& options);

struct LocalRunner::State {
  NcclRanks* nccl = nullptr;
  ~State() { destroy_nccl_ranks(nccl); }
};

LocalRunner::LocalRunner(Backend backend, int ranks, std::chrono::milliseconds timeout, bool nccl_blocking)
    : backend_(backend), ranks_(ranks), state_(std::make_unique<State>()) {
  RESHARD_REQUIRE(ranks >= 1, "a runner needs at least one rank, got ", ranks);
  if (backend == Backend::kNccl) state_->nccl = make_nccl_ranks(ranks, timeout, nccl_blocking);
}

LocalRunner::~LocalRunner() = default;

RunResult LocalRunner::run(const Plan& plan, RunOptions options) {
  RESHARD_REQUIRE(options.iters >= 1 && options.warmup >= 0, "iterations must be >= 1 and warm-up >= 0");
  RESHARD_REQUIRE(plan.src().mesh().size() == ranks_, "this runner has ", ranks_, " ranks; the plan's mesh ",
                  plan.src().mesh().str(), " has ", plan.src().mesh().size());
  options.backend = backend_;
  if (backend_ == Backend::kHost) return run_host(plan, options);
  return run_nccl(*state_->nccl, plan, options);
}

RunResult run_plan(const Plan& plan, const RunOptions& options) {
  return LocalRunner(options.backend, plan.src().mesh().size(), options.timeout, options.nccl_blocking)
      .run(plan, options);
}

}  // namespace reshard
