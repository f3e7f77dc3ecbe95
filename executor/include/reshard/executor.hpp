// Executor: carries out one rank's part of a plan, or of a batch of plans (plan_batch.hpp). Prepare once, run many.
//
//   reshard::Executor exec(plan, comm, device);          // collective over the plan's ranks: all construct together
//   exec.run({in, exec.input_bytes()}, {out, exec.output_bytes()}, stream);   // per iteration
//
//   reshard::Executor batch_exec(batch, comm, device);   // a PlanBatch: every tensor in one call
//   batch_exec.run(inputs, outputs, stream);             // spans of batch.size() buffers, tensor i's at index i
//
// Construction lowers the plan for comm.rank() (program.hpp), creates the group communicators its collectives need
// (once), uploads the copy descriptors and allocates the workspace. run() only enqueues work: no allocation and no
// host synchronisation, so it can be captured in a CUDA graph and replayed (run it once first: NCCL sets up its
// connections on first use). It walks the program's operations in order, each on its lane after the operations it
// waits for: one code path for every step kind, stage layout and transport.
#pragma once

#include <chrono>
#include <functional>
#include <span>
#include <string>

#include "reshard/backend.hpp"
#include "reshard/plan.hpp"
#include "reshard/plan_batch.hpp"

namespace reshard {

// One-sided (nvlink) plans address the peers' input and output tensors, so a run on buffers other than the last run's
// maps them anew: collectively, one host all-gather over the communicator (PeerLink::expose). Plans whose one-sided
// steps read only the peers' workspaces (a staged first step, PlanOptions::buffers_change) map once, on the first run,
// and never again whatever the caller's buffers. For the others, which runs map:
enum class BuffersChange {
  // Only a run whose buffers differ from this rank's last run's. Every rank must then change its buffers on the same
  // run, or the ranks that did wait in the all-gather for the others (a timeout error after the communicator's
  // timeout; the others' one-sided waits time out too). For callers that keep their buffers or change them together
  // (the CLI, the benchmarks, a runtime with fixed buffers): runs on the same buffers cost no host round trip.
  kTogether,
  // Every run of a one-sided plan, so each rank may change its buffers on any run independently of the others (tensors
  // from a caching allocator, which may hand one rank the same block again and another a new one: reshard.torch).
  // Costs one host all-gather per run; mappings stay cached per allocation, so only offsets are exchanged.
  kAnyRank,
};

struct ExecutorOptions {
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};  // for wait(): a stuck peer aborts instead of hanging
  bool trace = false;  // record events around each step's phases; read them with step_times() after wait()
  StageSchedule stage_schedule = StageSchedule::kLanes;  // how pipelined exchanges run their stages (program.hpp)
  Index coalesce_max_bytes = kDefaultCoalesceMaxBytes;   // batches: smaller messages are staged to join (program.hpp)
  // One-sided steps without reductions (program.hpp's OneSidedCopies): kPush (default) has every rank copy into its
  // readers' tensors; kPull has every rank copy out of its sources' tensors, on kernels where the copy engines cannot
  // reach the peer (ranks of one process). Pushing is faster through CUDA IPC mappings (one process per GPU) and keeps
  // the copy engines in one process (docs/transports.md). Staged first steps, fused steps and reductions pull either
  // way. Every rank must pass the same value.
  OneSidedCopies one_sided_copies = OneSidedCopies::kPush;
  BuffersChange buffers_change = BuffersChange::kTogether;  // see above; every rank must pass the same value
  // Receives one line per event: the plan this rank prepared and, after wait() of a traced run, its per-step
  // times. Unset: the environment variable RESHARD_LOG=1 sends them to stderr; otherwise nothing is logged.
  std::function<void(const std::string&)> log;
};

// Per step of the last traced run, in microseconds, on the main lane: before the first communication ("pack"), from
// its start to the end of the last one ("comm"), after it ("unpack"), and the whole step (side lanes joined).
struct StepTime {
  double pack_us = 0, comm_us = 0, unpack_us = 0, total_us = 0;
  bool pipelined = false;  // more than one communication in the step: the phases overlap and mean less
};

struct ConstBuffer {
  const void* data = nullptr;
  size_t bytes = 0;
};

struct MutableBuffer {
  void* data = nullptr;
  size_t bytes = 0;
};

class Executor {
 public:
  // The plan must be global or scoped to comm.rank(); comm must span the plan's mesh (size = mesh size).
  Executor(const Plan& plan, Communicator& comm, Device& device, ExecutorOptions options = {});
  // Every plan of the batch (same requirements); one program whose steps merge the plans' (plan_batch.hpp).
  Executor(const PlanBatch& batch, Communicator& comm, Device& device, ExecutorOptions options = {});
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // The number of tensors run() takes (1 for a plan).
  size_t tensors() const { return input_sizes_.size(); }
  // Tensor i's source and target local tensor on this rank (bytes); no argument: tensor 0's.
  size_t input_bytes(size_t tensor = 0) const { return input_sizes_.at(tensor); }
  size_t output_bytes(size_t tensor = 0) const { return output_sizes_.at(tensor); }
  size_t workspace_bytes() const { return workspace_bytes_; }
  const RankProgram& program() const { return program_; }

  // Enqueues the redistribution of this rank's `input` (its source local tensor, dense row-major) into `output`
  // (its target local tensor). Buffers smaller than required, or not usable by the device, are rejected with
  // kInvalidArgument before anything is enqueued. One-sided plans: a run on new buffers is collective
  // (ExecutorOptions::buffers_change says which runs). Input and output must not overlap, except for a plan between
  // identical layouts (is_identity) run in place, output == input: that run enqueues nothing, as DTensor returns its
  // input for an unchanged placement. kUnmappable, on every rank alike and with nothing enqueued, when a buffer the
  // peers must map one-sided is memory they cannot map (PeerLink::expose): run a plan on the NCCL transport instead.
  void run(ConstBuffer input, MutableBuffer output, StreamHandle stream);
  // Every tensor at once: inputs[i] and outputs[i] are tensor i's (tensors() of each; the same checks).
  void run(std::span<const ConstBuffer> inputs, std::span<const MutableBuffer> outputs, StreamHandle stream);
  // Waits for the enqueued work (with the configured timeout; see Communicator::wait).
  void wait(StreamHandle stream);
  // After a failure found elsewhere (a peer stopped; the caller gives up on this run): releases this rank's pending
  // one-sided waits so that its streams drain before anything is torn down (wait() does it itself on its timeout).
  // Results are garbage afterwards. Returns what was pending, for the caller's message (empty: nothing was).
  std::string abandon();
  // Phase times of the last run (options.trace set, after wait()); none after a run in place.
  std::vector<StepTime> step_times() const;

 private:
  struct OpRuntime;
  struct StepMarks;
  void prepare(const Mesh& mesh);
  Copies runnable(const Copies& copies) const;  // kernels where the copy engines cannot reach a peer read
  void sizes_and_workspace();
  // Refuses overlapping input and output buffers, except an identity plan's (or a batch's identity tensor's) in place.
  // Sets in_place_ (a plan run in place) and identity_copies_needed_ (some identity tensor of a batch is not).
  void check_aliasing(std::span<const ConstBuffer> inputs, std::span<const MutableBuffer> outputs);
  void execute(size_t index, const BufferBases& bases, StreamHandle stream);

  Communicator& comm_;
  Device& device_;
  ExecutorOptions options_;
  RankProgram program_;
  std::vector<size_t> input_sizes_, output_sizes_;  // per tensor
  size_t workspace_bytes_ = 0;
  std::unique_ptr<DeviceMemory> workspace_;
  std::unique_ptr<PeerLink> peers_;  // one-sided steps
  std::vector<const void*> inputs_;  // per tensor: the buffers validated by the last run (BufferBases' tables)
  std::vector<void*> outputs_;
  std::vector<const void*> exposed_inputs_;  // per tensor: what expose() publishes (null: a kind no peer addresses)
  std::vector<void*> exposed_outputs_, exposed_works_;
  unsigned exposed_kinds_ = 0;  // bits of Buffer: the kinds of buffers some rank addresses in its peers
  bool checked_ = false;
  bool in_place_ = false;                       // the last checked buffers run it in place: nothing to enqueue
  std::vector<bool> identity_tensor_;           // per tensor: listed in RankProgram::identity_tensors
  std::unique_ptr<CopyBatch> identity_copies_;  // each identity tensor of a batch whole, input to output
  bool identity_copies_needed_ = false;         // the last checked buffers do not run every identity tensor in place
  bool exposed_ = false;                        // this rank's buffers were mapped by its peers (the first run does it)
  std::vector<OpRuntime> ops_;
  std::vector<StepMarks> marks_;                 // options.trace: per step
  std::function<void(const std::string&)> log_;  // options.log, or stderr under RESHARD_LOG=1, or unset
  bool trace_ops_ = false;                       // RESHARD_TRACE_OPS=1: each operation as run() enqueues it
};

}  // namespace reshard
