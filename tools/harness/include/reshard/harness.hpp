// Runs a plan end to end for tools, benchmarks and tests: fills every rank's source tensor with the deterministic
// pattern, runs the executor, times iterations and verifies every element of every rank.
//
// Verification protocol: the output is poisoned with 0xA5 bytes, the plan runs once and every element is checked;
// then poisoned with 0x5A, run and checked again (an element no step writes fails at least one of the two, even
// where the pattern happens to equal a poison byte); then the timed iterations, and a final check of their result.
//
// Resources: before allocating, a run computes what it needs (memory_check.hpp) and refuses (kInvalidArgument) what
// does not fit. Timing keeps at most IterationSamples::kDefaultCapacity samples per rank and, on GPUs, a small ring
// of CUDA events (timing.hpp), so memory does not grow with the iteration count. A stop request (interrupt.hpp)
// ends the timed loops between iterations with Interrupted.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "reshard/executor.hpp"
#include "reshard/plan.hpp"
#include "reshard/plan_batch.hpp"
#include "reshard/timing.hpp"

namespace reshard {

enum class Backend { kHost, kNccl };
std::string_view to_string(Backend b);

// How the harness's NCCL communicators are created. Non-blocking (the default) returns ncclInProgress from NCCL calls
// and lets the harness poll them against its timeout; blocking makes each call return when enqueued, which saves a
// thread handoff per group (tens of microseconds) on small tensors. `reshard run --nccl-blocking` selects it.
enum class NcclMode { kNonBlocking, kBlocking };
std::string_view to_string(NcclMode m);

// The most calls one timing graph may capture (RunOptions::graph_calls): a graph holds every call's nodes.
inline constexpr int kMaxGraphCalls = 1000;

// Which buffers the runs hand the executor (nccl backend; host ranks map nothing). kSame: the same every run.
// Otherwise another set on every run, as a caching allocator's caller hands them, run with
// ExecutorOptions::buffers_change = kAnyRank as reshard.torch runs: kCached takes kCachedBufferSets sets in turn
// (after the first round every peer has mapped them: the per-call cost of changing buffers), kNew a set no run has
// used (every reader maps every buffer first: the cost of fresh allocations). Every set is allocated, its sources
// filled and its targets poisoned before the first run; the poisoned verification runs and the final check use the
// set of the run they check.
enum class BufferUse { kSame, kCached, kNew };
std::string_view to_string(BufferUse b);
inline constexpr int kCachedBufferSets = 4;
inline constexpr int kMaxBufferSets = 4096;

struct RunOptions {
  Backend backend = Backend::kHost;
  int warmup = 3;
  int iters = 20;
  bool cuda_graph = false;  // capture graph_calls runs in a CUDA graph and time its replays (NCCL backend)
  // Runs captured back to back in the graph; a timed iteration is one replay, its sample the replay's time divided by
  // this (nccl-tests' -G likewise captures its iterations into one graph): the per-call cost inside a graph, without
  // the host's cudaGraphLaunch and event record per call, which small steps would otherwise wait for.
  int graph_calls = 10;  // 1 to kMaxGraphCalls
  bool trace = false;    // one more run with per-step event timings (RunResult::steps)
  NcclMode nccl_mode = NcclMode::kNonBlocking;
  StageSchedule stage_schedule = StageSchedule::kLanes;  // how pipelined steps run their stages (executor.hpp)
  Index coalesce_max_bytes = kDefaultCoalesceMaxBytes;   // batches: smaller messages are staged to join (program.hpp)
  OneSidedCopies one_sided_copies = OneSidedCopies::kPush;  // push or pull in one-sided steps (executor.hpp)
  BufferUse buffers = BufferUse::kSame;                     // see BufferUse
  // Testing aid (NCCL backend): the process of rank `fault_rank` exits abruptly (std::_Exit(3)) at `fault_point`, as
  // a crashed rank would, so that tests can check the other ranks fail within their timeout instead of hanging.
  enum class FaultPoint { kNone, kAfterPrepare, kMidRun } fault_point = FaultPoint::kNone;
  int fault_rank = -1;
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
};

// Buffer sets a run of `options` allocates per rank (1 for kSame; kNew: one per run, the verification and traced
// runs included). kInvalidArgument past kMaxBufferSets and for a CUDA graph with changing buffers (its replays would
// repeat the captured buffers). The host backend runs only kSame.
int buffer_sets(const RunOptions& options);

struct RunResult {
  Backend backend = Backend::kHost;
  int ranks = 0;
  TimingSummary timing;      // per timed iteration, the slowest rank's time
  double median_us = 0;      // timing.median_us
  Index wrong_elements = 0;  // summed over ranks and over the verification passes
  Index checked_elements = 0;
  size_t workspace_bytes = 0;   // largest rank's
  std::string first_error;      // first wrong element, for messages
  std::vector<StepTime> steps;  // options.trace: per step, the slowest rank's phase times
};

// Whether the harness runs tensor t of `batch` in place: a plan between identical layouts (is_identity), its output
// buffer the input's, as DTensor returns its input for an unchanged placement. Nothing is enqueued for it; each
// verification pass fills its source again (instead of poisoning the output) and checks every element.
inline bool runs_in_place(const PlanBatch& batch, size_t t) { return is_identity(batch.plan(t)); }

// Whether `n` ranks can run on local GPUs with NCCL (built with CUDA and at least n GPUs visible).
bool nccl_available(int n);
// GPUs visible to this process (0 without a driver, without GPUs, or in a build without CUDA); makes no CUDA call
// that can fail loudly.
int local_gpu_count();

// Runs plans on `ranks` ranks in this process, one thread per rank (host backend, or one GPU per rank for NCCL),
// keeping its NCCL communicators between runs.
class LocalRunner {
 public:
  LocalRunner(Backend backend, int ranks, std::chrono::milliseconds timeout = std::chrono::seconds(120),
              NcclMode nccl_mode = NcclMode::kNonBlocking);
  ~LocalRunner();
  LocalRunner(const LocalRunner&) = delete;
  LocalRunner& operator=(const LocalRunner&) = delete;
  // The plan's mesh must have `ranks` ranks; options.backend and options.nccl_mode are the runner's. Checks memory
  // first (check_memory).
  RunResult run(const Plan& plan, RunOptions options);
  // Every tensor of a batch in one executor call per iteration (plan_batch.hpp); verified tensor by tensor, the
  // counts summed. A plan runs as a batch of one.
  RunResult run(const PlanBatch& batch, RunOptions options);

 private:
  struct State;
  Backend backend_;
  int ranks_;
  std::unique_ptr<State> state_;
};

// Single process, fresh runner: LocalRunner(options.backend, mesh size, ...).run(plan, options).
RunResult run_plan(const Plan& plan, const RunOptions& options);

// Single process, fresh runner, a batch (LocalRunner::run).
RunResult run_batch(const PlanBatch& batch, const RunOptions& options);

// One rank of a job that runs one process per rank (as launchers start them): the NCCL communicator is made once,
// its id shared through `rendezvous` (file:PATH or tcp:HOST:PORT), and kept between runs. Every run() is collective:
// every process calls it with the same plan, in the same order. Results are combined over the processes (wrong
// elements summed, iteration times and workspace maxed) and every rank returns the totals. A run that fails aborts
// the communicator: the runner is then spent (later runs fail).
class ProcessRunner {
 public:
  ProcessRunner(int rank, int world_size, int device, const std::string& rendezvous,
                std::chrono::milliseconds timeout = std::chrono::seconds(120),
                NcclMode nccl_mode = NcclMode::kNonBlocking);
  ~ProcessRunner();
  ProcessRunner(const ProcessRunner&) = delete;
  ProcessRunner& operator=(const ProcessRunner&) = delete;
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  // The plan's mesh must span the job's world; a rank-scoped plan must be this rank's. options.backend and
  // options.nccl_mode are the runner's. Checks this rank's device memory first (check_memory).
  RunResult run(const Plan& plan, const RunOptions& options);

 private:
  struct State;
  int rank_, world_size_, device_;
  std::unique_ptr<State> state_;
};

// One run in a fresh ProcessRunner.
RunResult run_plan_process(const Plan& plan, int rank, int world_size, int device, const std::string& rendezvous,
                           const RunOptions& options);

// What one rank's run gave, on either backend.
struct RankOutcome {
  std::vector<StepTime> steps;
  IterationSamples times;
  std::optional<double> issue_us;  // GPU runs: the host's time to enqueue one call (TimingSummary::issue_us)
  Index wrong = 0, checked = 0;
  size_t workspace = 0;
};

// The run's result over its ranks: wrong and checked elements summed, per iteration and per step phase the slowest
// rank's time, the largest workspace and issue time.
RunResult combine_ranks(Backend backend, const std::vector<RankOutcome>& ranks);

// Link bandwidths measured on local GPUs 0 and 1 with large transfers (decimal GB/s), for the lower bound.
struct LinkMeasurement {
  double peer_copy_GBps = 0;    // cudaMemcpyPeerAsync, one direction
  double nccl_p2p_GBps = 0;     // NCCL send/recv, both directions at once, per direction
  double device_copy_GBps = 0;  // cudaMemcpyAsync device to device on one GPU (bytes copied per second)
  size_t bytes = 0;
};
// Runs a one-sided plan (every communicating step p2p on the nvlink transport) with its ranks sharing the visible GPUs:
// a thread per rank, rank r on GPU r % local_gpu_count(), no NCCL (which refuses two ranks on one GPU). Tests the
// NVLink transport's ordering, copies and fused kernels with more ranks than GPUs. Verified and timed as run()
// (times include every rank's work serialized on shared GPUs). kInvalidArgument for other plans or without a GPU.
RunResult run_shared_gpus(const Plan& plan, const RunOptions& options);

LinkMeasurement measure_links(size_t bytes = size_t(1) << 30);

}  // namespace reshard
