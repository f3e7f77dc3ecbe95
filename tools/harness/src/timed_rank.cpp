#include "timed_rank.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "gpu_timing.hpp"
#include "nccl_rank.hpp"
#include "reshard/interrupt.hpp"
#include "stream_graph.hpp"

namespace reshard::detail {

RankOutcome run_timed_rank(const Plan& plan, Communicator& comm, int device_ordinal, const RunOptions& options,
                           const std::function<void()>& abort_comm, const std::function<void()>& prepared,
                           const std::function<void()>& finished) {
  return run_timed_rank(PlanBatch::of(plan), comm, device_ordinal, options, abort_comm, prepared, finished);
}

RankOutcome run_timed_rank(const PlanBatch& batch, Communicator& comm, int device_ordinal, const RunOptions& options,
                           const std::function<void()>& abort_comm, const std::function<void()>& prepared,
                           const std::function<void()>& finished) {
  const int r = comm.rank();
  CudaDevice device(device_ordinal);
  ExecutorOptions eo{options.timeout, options.trace, options.stage_schedule, options.coalesce_max_bytes,
                     options.one_sided_copies};
  if (options.buffers != BufferUse::kSame) eo.buffers_change = BuffersChange::kAnyRank;
  const int sets = buffer_sets(options);
  RankRedistribution redistribution(batch, comm, device, eo, sets);
  // Run k's buffer set (RunOptions::buffers); kCached warms every set before the timed runs.
  auto set_of_run = [&](int k) { return options.buffers == BufferUse::kCached ? k % kCachedBufferSets : k % sets; };
  const int warmup =
      options.buffers == BufferUse::kCached ? std::max(options.warmup, kCachedBufferSets - 2) : options.warmup;
  auto fault = [&](RunOptions::FaultPoint point) {
    if (options.fault_point == point && options.fault_rank == r) {
      fmt::print(stderr, "rank {}: injected fault, exiting\n", r);
      std::_Exit(3);
    }
  };
  // RESHARD_TRACE_PHASES=1: each rank prints the phase it enters (stderr), to see where a stalled run stopped.
  const bool trace_phases = std::getenv("RESHARD_TRACE_PHASES") != nullptr;
  auto phase = [&](const char* what, int i = -1) {
    if (trace_phases) fmt::print(stderr, "rank {}: {}{}\n", r, what, i < 0 ? std::string() : fmt::format(" {}", i));
  };
  phase("prepared");
  if (prepared) prepared();
  phase("met");
  fault(RunOptions::FaultPoint::kAfterPrepare);
  RankOutcome out;
  out.workspace = redistribution.workspace_bytes();
  const cudaStream_t stream = redistribution.stream();
  int runs = 0;
  auto run = [&] {
    phase("run", runs);
    redistribution.use_set(set_of_run(runs++));
    redistribution.run();
  };
  auto verify = [&] {
    phase("verify");
    out.wrong += redistribution.count_wrong();
    out.checked += redistribution.target_elements();
  };
  for (int poison : {0xA5, 0x5A}) {
    phase("poison", poison);
    redistribution.use_set(set_of_run(runs));
    redistribution.poison(poison);
    run();
    verify();
  }
  fault(RunOptions::FaultPoint::kMidRun);
  for (int i = 0; i < warmup; ++i) {
    throw_if_stop_requested();
    run();
  }
  phase("warmup wait");
  redistribution.wait();
  phase("timing");
  StreamGraph graph;
  RESHARD_REQUIRE(options.graph_calls >= 1 && options.graph_calls <= kMaxGraphCalls,
                  "calls per CUDA graph must be between 1 and ", kMaxGraphCalls, ", got ", options.graph_calls);
  const int graph_calls = options.cuda_graph ? options.graph_calls : 1;
  if (options.cuda_graph) {
    graph.capture(stream, [&] {
      for (int k = 0; k < graph_calls; ++k) run();
    });
    graph.launch(stream);
    redistribution.wait();
  }
  // The one-sided waits are released before the communicator aborts: tearing down with a stream stuck on a stopped
  // peer can block in the driver (Executor::abandon).
  auto stalled = [&] {
    const std::string pending = redistribution.abandon();
    abort_comm();
    fail(ErrorKind::kTimeout, cat("rank ", r, ": the timed loop made no progress for ", options.timeout.count(),
                                  " ms (a peer stopped or died?); the communicator was aborted",
                                  pending.empty() ? "" : "; one-sided waits pending: ", pending));
  };
  double issue_us = 0;
  out.times = time_on_stream(
      stream, options.iters,
      [&] {
        if (options.cuda_graph)
          graph.launch(stream);
        else
          run();
      },
      options.timeout, stalled, &issue_us);
  out.issue_us = issue_us / graph_calls;
  if (graph_calls > 1)  // per call
    for (double& v : out.times.mutable_values()) v /= graph_calls;
  phase("final wait");
  redistribution.wait();
  verify();
  if (options.trace) {
    run();
    redistribution.wait();
    out.steps = redistribution.step_times();
  }
  phase("finishing");
  if (finished) finished();
  phase("finished");
  return out;
}

}  // namespace reshard::detail
