// The harness's host side: the host backend's rank loop, the runner, and what both backends share.
#include <algorithm>
#include <cstring>

#include "reshard/executor.hpp"
#include "reshard/harness.hpp"
#include "reshard/host_backend.hpp"
#include "reshard/interrupt.hpp"
#include "reshard/memory_check.hpp"
#include "reshard/pattern.hpp"

namespace reshard {

std::string_view to_string(Backend b) { return b == Backend::kHost ? "host" : "nccl"; }
std::string_view to_string(NcclMode m) { return m == NcclMode::kBlocking ? "blocking" : "non-blocking"; }
std::string_view to_string(BufferUse b) {
  return b == BufferUse::kSame ? "same" : b == BufferUse::kCached ? "cached" : "new";
}

int buffer_sets(const RunOptions& options) {
  if (options.buffers == BufferUse::kSame) return 1;
  RESHARD_REQUIRE(!options.cuda_graph, "changing buffers (", to_string(options.buffers),
                  ") cannot be timed in a CUDA graph: its replays repeat the captured buffers");
  if (options.buffers == BufferUse::kCached) return kCachedBufferSets;
  const long long runs = 2LL + options.warmup + options.iters + (options.trace ? 1 : 0);
  RESHARD_REQUIRE(runs <= kMaxBufferSets, "new buffers on every run need one set per run, at most ", kMaxBufferSets,
                  ", but ", options.warmup, " warm-up and ", options.iters, " timed runs make ", runs);
  return static_cast<int>(runs);
}

namespace {

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

}  // namespace

RunResult combine_ranks(Backend backend, const std::vector<RankOutcome>& ranks) {
  RunResult res;
  res.backend = backend;
  res.ranks = static_cast<int>(ranks.size());
  IterationSamples times = ranks.at(0).times;
  std::vector<std::vector<StepTime>> traces;
  std::optional<double> issue_us;
  for (const RankOutcome& o : ranks) {
    times.max_with(o.times);
    if (o.issue_us) issue_us = std::max(issue_us.value_or(0.0), *o.issue_us);
    traces.push_back(o.steps);
    res.wrong_elements += o.wrong;
    res.checked_elements += o.checked;
    res.workspace_bytes = std::max(res.workspace_bytes, o.workspace);
  }
  res.timing = summarize(times);
  res.timing.issue_us = issue_us;
  res.median_us = res.timing.median_us;
  res.steps = slowest(traces);
  return res;
}

namespace {

// Every tensor of the batch in one executor (a plan runs as a batch of one: the same executor path).
RankOutcome run_host_rank(const PlanBatch& batch, HostWorld& world, int r, const RunOptions& options) {
  HostCommunicator comm(world, r);
  HostDevice device;
  Executor exec(batch, comm, device,
                ExecutorOptions{options.timeout, options.trace, options.stage_schedule, options.coalesce_max_bytes,
                                options.one_sided_copies});
  RankOutcome out;
  out.workspace = exec.workspace_bytes();
  const size_t n = batch.size();
  std::vector<std::vector<std::byte>> inputs(n), outputs(n);
  std::vector<ConstBuffer> in(n);
  std::vector<MutableBuffer> outs(n);
  for (size_t t = 0; t < n; ++t) {
    const Plan& plan = batch.plan(t);
    const bool in_place = runs_in_place(batch, t);
    inputs[t].resize(exec.input_bytes(t));
    if (!in_place) outputs[t].resize(exec.output_bytes(t));
    fill_local(inputs[t].data(), plan.src(), r, plan.dtype());
    in[t] = {inputs[t].data(), inputs[t].size()};
    std::vector<std::byte>& target = in_place ? inputs[t] : outputs[t];
    outs[t] = {target.data(), target.size()};
  }
  auto run = [&] { exec.run(in, outs, nullptr); };
  auto verify = [&] {
    for (size_t t = 0; t < n; ++t) {
      const Plan& plan = batch.plan(t);
      out.wrong += count_local_mismatches(outs[t].data, plan.src(), plan.dst(), r, plan.dtype(), plan.target_dtype());
      out.checked += volume(plan.dst().box(r));
    }
  };
  for (int poison : {0xA5, 0x5A}) {
    for (size_t t = 0; t < n; ++t) {  // in place, the output is the source: it is filled again instead
      if (runs_in_place(batch, t))
        fill_local(inputs[t].data(), batch.plan(t).src(), r, batch.plan(t).dtype());
      else if (!outputs[t].empty())
        std::memset(outputs[t].data(), poison, outputs[t].size());
    }
    run();
    verify();
  }
  for (int i = 0; i < options.warmup; ++i) {
    throw_if_stop_requested();
    run();
  }
  out.times = time_host_calls(options.iters, run);
  verify();
  if (options.trace) {
    run();
    out.steps = exec.step_times();
  }
  return out;
}

RunResult run_host(const PlanBatch& batch, const RunOptions& options) {
  const int n = batch.mesh().world_size();
  HostWorld world(n, HostWorldOptions{options.timeout});
  std::vector<RankOutcome> outcomes(n);
  run_ranks(
      n, [&](int r) { outcomes[r] = run_host_rank(batch, world, r, options); }, &world);
  return combine_ranks(Backend::kHost, outcomes);
}

}  // namespace

// The NCCL side lives in harness_nccl.cpp (CUDA builds) or harness_without_cuda.cpp.
struct NcclRanks;
NcclRanks* make_nccl_ranks(int n, std::chrono::milliseconds timeout, NcclMode mode);  // free: destroy_nccl_ranks
void destroy_nccl_ranks(NcclRanks* ranks);
RunResult run_nccl(NcclRanks& ranks, const PlanBatch& batch, const RunOptions& options);

struct LocalRunner::State {
  NcclRanks* nccl = nullptr;
  NcclMode mode = NcclMode::kNonBlocking;
  ~State() { destroy_nccl_ranks(nccl); }
};

LocalRunner::LocalRunner(Backend backend, int ranks, std::chrono::milliseconds timeout, NcclMode nccl_mode)
    : backend_(backend), ranks_(ranks), state_(std::make_unique<State>()) {
  RESHARD_REQUIRE(ranks >= 1, "a runner needs at least one rank, got ", ranks);
  state_->mode = nccl_mode;
  if (backend == Backend::kNccl) state_->nccl = make_nccl_ranks(ranks, timeout, nccl_mode);
}

LocalRunner::~LocalRunner() = default;

RunResult LocalRunner::run(const Plan& plan, RunOptions options) { return run(PlanBatch::of(plan), options); }

RunResult LocalRunner::run(const PlanBatch& batch, RunOptions options) {
  RESHARD_REQUIRE(options.iters >= 1 && options.warmup >= 0, "iterations must be >= 1 and warm-up >= 0");
  const Mesh& mesh = batch.mesh();
  RESHARD_REQUIRE(mesh.world_size() == ranks_, "this runner has ", ranks_, " ranks; the plan's mesh ", mesh.str(),
                  " is in a world of ", mesh.world_size());
  const std::optional<int>& scope = batch.plan(0).scope_rank();
  RESHARD_REQUIRE(!scope, "the plan is scoped to rank ", scope.value_or(0),
                  "; running every rank in one process needs the global plan");
  options.backend = backend_;
  options.nccl_mode = state_->mode;
  std::vector<int> devices;
  if (backend_ == Backend::kNccl)
    for (int r = 0; r < ranks_; ++r) devices.push_back(r);
  RESHARD_REQUIRE(backend_ == Backend::kNccl || options.buffers == BufferUse::kSame, "changing buffers (",
                  to_string(options.buffers), ") need the nccl backend: host ranks map nothing");
  check_memory(memory_need(batch, backend_, std::nullopt, buffer_sets(options)), backend_, devices);
  if (backend_ == Backend::kHost) return run_host(batch, options);
  return run_nccl(*state_->nccl, batch, options);
}

RunResult run_plan(const Plan& plan, const RunOptions& options) {
  if (options.backend == Backend::kHost) check_memory(memory_need(plan, Backend::kHost), Backend::kHost, {});
  return LocalRunner(options.backend, plan.src().mesh().world_size(), options.timeout, options.nccl_mode)
      .run(plan, options);
}

}  // namespace reshard

namespace reshard {

RunResult run_batch(const PlanBatch& batch, const RunOptions& options) {
  if (options.backend == Backend::kHost) check_memory(memory_need(batch, Backend::kHost), Backend::kHost, {});
  return LocalRunner(options.backend, batch.mesh().world_size(), options.timeout, options.nccl_mode)
      .run(batch, options);
}

}  // namespace reshard
