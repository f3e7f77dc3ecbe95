#include "reshard/executor.hpp"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string_view>
#include <type_traits>

#include "reshard/environment.hpp"

namespace reshard {

// What an operation needs at run time, prepared at construction.
struct Executor::OpRuntime {
  std::unique_ptr<CopyBatch> batch;  // Copies, Reductions
  std::vector<SendOp> sends;         // Exchange: pointers filled in per run (no allocation)
  std::vector<RecvOp> recvs;
  Communicator* group = nullptr;      // CollectiveOp
  std::unique_ptr<DeviceEvent> done;  // recorded after the operation when a later one on another lane waits for it
  bool communicates = false;
};

// options.trace: events on the main lane around each step's phases.
struct Executor::StepMarks {
  std::unique_ptr<DeviceEvent> start, comm_begin, comm_end, end;
  int comm_ops = 0;
};

namespace {

const void* address(const BufferBases& b, const BufferRef& ref, int es) { return address_of(b, ref, es); }

void* mutable_address(const BufferBases& b, const BufferRef& ref, int es) {
  RESHARD_REQUIRE(ref.buffer != Buffer::kInput && ref.peer < 0, "internal: a program writes into an input");
  return const_cast<void*>(address_of(b, ref, es));
}

// The dtype a batch of reductions runs over: its regions' own (a batch program's), else the program's.
DType reduction_dtype(const std::vector<ReduceRegion>& regions, DType program) {
  return regions.empty() ? program : regions.front().dtype.value_or(program);
}

// Whether a run's one-sided steps may address the peers' tensors, not only their workspaces: every nvlink step but a
// staged first one (Step::staged). Decided from the plans, so every rank decides alike (mapping is collective).
// The log sink: the caller's, else stderr when the environment says RESHARD_LOG=1.
std::function<void(const std::string&)> log_sink(const ExecutorOptions& options) {
  if (options.log) return options.log;
  if (!env_log_to_stderr()) return {};
  return [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
}

// A profiler range over a scope (Device::range_push/pop), closed on every exit.
class Range {
 public:
  Range(Device& device, const char* name) : device_(device) { device_.range_push(name); }
  ~Range() { device_.range_pop(); }
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;

 private:
  Device& device_;
};

// The kinds of peer buffers (bit Buffer: input, output, work) a program addresses one-sided.
unsigned peer_buffer_kinds(const RankProgram& program) {
  unsigned kinds = 0;
  auto see = [&](const BufferRef& r) {
    if (r.peer >= 0) kinds |= 1u << static_cast<unsigned>(r.buffer);
  };
  auto see_reductions = [&](const std::vector<ReduceRegion>& regions) {
    for (const ReduceRegion& r : regions) {
      see(r.dst);
      for (const BufferRef& s : r.srcs) see(s);
    }
  };
  auto see_copies = [&](const std::vector<CopyRegion>& regions) {
    for (const CopyRegion& c : regions) {
      see(c.src);
      see(c.dst);
    }
  };
  for (const Op& op : program.ops) {
    if (const auto* c = std::get_if<Copies>(&op.body)) see_copies(c->regions);
    if (const auto* r = std::get_if<Reductions>(&op.body)) see_reductions(r->regions);
    if (const auto* f = std::get_if<FusedPeerStep>(&op.body)) {
      see_copies(f->regions);
      see_reductions(f->reduce);
    }
  }
  return kinds;
}

// Collective (host): refuses ranks whose step structure differs from this rank's, and returns the kinds of buffers
// (bits as peer_buffer_kinds) that some rank addresses in its peers: what every rank exposes.
unsigned require_same_steps(const RankProgram& program, Communicator& comm) {
  const std::uint64_t mine[2] = {program.step_signature, peer_buffer_kinds(program)};
  std::vector<std::uint64_t> all(2 * static_cast<size_t>(comm.size()));
  comm.all_gather_host(mine, all.data(), sizeof mine);
  unsigned kinds = 0;
  for (int r = 0; r < comm.size(); ++r) {
    RESHARD_REQUIRE(all[2 * static_cast<size_t>(r)] == mine[0], "rank ", comm.rank(), "'s plan and rank ", r,
                    "'s differ in their steps (kinds, transports, fused flags, mesh dims) or in "
                    "ExecutorOptions::one_sided_copies: one-sided steps need every rank to run the same plan");
    kinds |= static_cast<unsigned>(all[2 * static_cast<size_t>(r) + 1]);
  }
  return kinds;
}

}  // namespace

Executor::Executor(const Plan& plan, Communicator& comm, Device& device, ExecutorOptions options)
    : Executor(PlanBatch::of(plan), comm, device, std::move(options)) {}

Executor::Executor(const PlanBatch& batch, Communicator& comm, Device& device, ExecutorOptions options)
    : comm_(comm), device_(device), options_(options), log_(log_sink(options)), trace_ops_(env_trace_ops()) {
  const Range range(device_, "reshard prepare");
  const Mesh& mesh = batch.mesh();
  RESHARD_REQUIRE(comm.size() == mesh.world_size(), "the communicator has ", comm.size(), " ranks but the ",
                  batch.size() == 1 ? "plan" : "batch", "'s mesh ", mesh.str(), " is in a world of ",
                  mesh.world_size());
  // One-sided steps push or pull as ExecutorOptions::one_sided_copies says (other steps are lowered alike either way).
  program_ = lower(batch, comm.rank(),
                   LowerOptions{options.stage_schedule, options.coalesce_max_bytes, options.one_sided_copies});
  if (program_.one_sided) {
    // Every rank of the plan connects (collective); every rank's program must have the same steps and copy direction.
    exposed_kinds_ = require_same_steps(program_, comm_);
    peers_ = device_.connect_peers(comm_);
  }
  sizes_and_workspace();
  prepare(mesh);
  if (!log_) return;
  if (batch.size() == 1) {
    const Plan& plan = batch.plan(0);
    log_(cat("reshard: rank ", comm.rank(), " prepared ", to_string(plan.strategy()), "/", to_string(plan.transport()),
             " for ", plan.src().str(), " -> [", to_string(plan.dst().placements()), "] ", to_string(plan.dtype()),
             ": ", plan.steps().size(), " steps, ", plan.estimated_us(), " us estimated, ", workspace_bytes_,
             " B workspace, ", program_.ops.size(), " operations"));
  } else {
    log_(cat("reshard: rank ", comm.rank(), " prepared a batch of ", batch.size(), " tensors on ", mesh.str(), ": ",
             program_.step_count, " steps, ", batch.estimated_us(), " us estimated (sum), ", workspace_bytes_,
             " B workspace, ", program_.ops.size(), " operations"));
  }
}

void Executor::sizes_and_workspace() {
  const int es = element_size(program_.dtype);
  if (program_.tensor_input_bytes.empty()) {
    input_sizes_ = {static_cast<size_t>(program_.input_elements) * es};
    output_sizes_ = {static_cast<size_t>(program_.output_elements) *
                     static_cast<size_t>(element_size(program_.output_dtype.value_or(program_.dtype)))};
  } else {
    input_sizes_.assign(program_.tensor_input_bytes.begin(), program_.tensor_input_bytes.end());
    output_sizes_.assign(program_.tensor_output_bytes.begin(), program_.tensor_output_bytes.end());
  }
  inputs_.assign(input_sizes_.size(), nullptr);
  outputs_.assign(output_sizes_.size(), nullptr);
  exposed_inputs_.assign(input_sizes_.size(), nullptr);
  exposed_outputs_.assign(output_sizes_.size(), nullptr);
  exposed_works_.assign(input_sizes_.size(), nullptr);
  workspace_bytes_ = static_cast<size_t>(program_.work_elements) * es;
  if (workspace_bytes_ > 0) workspace_ = device_.allocate(workspace_bytes_);
}

Executor::~Executor() = default;

// Copy-engine copies that read a peer the copy engines cannot safely reach (PeerLink::copy_engines_reach) run as
// kernels: same regions, same result, SMs instead of copy engines.
Copies Executor::runnable(const Copies& copies) const {
  if (copies.engine != CopyEngine::kCopyEngine || !peers_) return copies;
  for (const CopyRegion& r : copies.regions) {
    if (r.src.peer >= 0 && !peers_->copy_engines_reach(r.src.peer)) {
      Copies kernels = copies;
      kernels.engine = CopyEngine::kKernel;
      return kernels;
    }
  }
  return copies;
}

void Executor::prepare(const Mesh& mesh) {
  // Group communicators, in the program's first-use order (the same on every rank).
  for (const GroupSpec& g : program_.communicators) comm_.group(group_mesh(mesh, g), g.mesh_dims);
  const int es = element_size(program_.dtype);
  identity_tensor_.assign(input_sizes_.size(), false);
  if (!program_.identity_tensors.empty()) {
    Copies whole;  // the batch's program counts bytes (dtype u8)
    for (int t : program_.identity_tensors) {
      identity_tensor_.at(static_cast<size_t>(t)) = true;
      const Index bytes = program_.tensor_output_bytes.at(static_cast<size_t>(t));
      if (bytes > 0)
        whole.regions.push_back(CopyRegion{BufferRef{Buffer::kInput, 0, -1, t}, BufferRef{Buffer::kOutput, 0, -1, t},
                                           Dims{bytes}, Dims{1}, Dims{1}});
    }
    identity_copies_ = device_.prepare_copies(whole, es);
  }
  ops_.resize(program_.ops.size());
  for (size_t i = 0; i < program_.ops.size(); ++i) {
    const Op& op = program_.ops[i];
    OpRuntime& rt = ops_[i];
    std::visit(
        [&](const auto& body) {
          using T = std::decay_t<decltype(body)>;
          if constexpr (std::is_same_v<T, Copies>) {
            rt.batch = program_.output_dtype
                           ? device_.prepare_copies(runnable(body), program_.dtype, *program_.output_dtype)
                           : device_.prepare_copies(runnable(body), es);
          } else if constexpr (std::is_same_v<T, Reductions>) {
            const DType dtype = reduction_dtype(body.regions, program_.dtype);
            rt.batch = program_.output_dtype ? device_.prepare_reductions(body.regions, dtype, *program_.output_dtype)
                                             : device_.prepare_reductions(body.regions, dtype);
          } else if constexpr (std::is_same_v<T, Exchange>) {
            rt.sends.resize(body.sends.size());
            rt.recvs.resize(body.recvs.size());
            rt.communicates = true;
          } else if constexpr (std::is_same_v<T, CollectiveOp>) {
            rt.group = &comm_.group(group_mesh(mesh, group_of(body)), body.mesh_dims);
            rt.communicates = true;
          } else if constexpr (std::is_same_v<T, PeerSync>) {
            for (int p : body.notify) peers_->require(p);
            for (int p : body.await) peers_->require(p);
            rt.communicates = true;
          } else if constexpr (std::is_same_v<T, FusedPeerStep>) {
            for (const PeerSync* s : {&body.ready, &body.done}) {
              for (int p : s->notify) peers_->require(p);
              for (int p : s->await) peers_->require(p);
            }
            RESHARD_REQUIRE(body.regions.empty() || body.reduce.empty(),
                            "internal: a fused step either copies or reduces, not both");
            const DType dtype = reduction_dtype(body.reduce, program_.dtype);
            rt.batch = program_.output_dtype
                           ? peers_->prepare_fused(body, dtype, *program_.output_dtype, options_.timeout)
                           : peers_->prepare_fused(body, dtype, options_.timeout);
            rt.communicates = true;
          }
        },
        op.body);
    for (int dep : op.after) {
      RESHARD_REQUIRE(dep >= 0 && static_cast<size_t>(dep) < i, "internal: operation ", i, " waits for ", dep);
      if (!ops_[dep].done) ops_[dep].done = device_.create_event();
    }
  }
  if (options_.trace) {
    marks_.resize(program_.step_count);
    for (StepMarks& m : marks_)
      for (auto* e : {&m.start, &m.comm_begin, &m.comm_end, &m.end}) *e = device_.create_event();
    for (size_t i = 0; i < program_.ops.size(); ++i)
      if (ops_[i].communicates && program_.ops[i].lane == Lane::kMain) ++marks_[program_.ops[i].step].comm_ops;
  }
}

void Executor::execute(size_t index, const BufferBases& bases, StreamHandle stream) {
  const Op& op = program_.ops[index];
  OpRuntime& rt = ops_[index];
  const int es = element_size(program_.dtype);
  const size_t esz = static_cast<size_t>(es);
  std::visit(
      [&](const auto& body) {
        using T = std::decay_t<decltype(body)>;
        if constexpr (std::is_same_v<T, Copies> || std::is_same_v<T, Reductions> || std::is_same_v<T, FusedPeerStep>) {
          rt.batch->run(bases, stream);
        } else if constexpr (std::is_same_v<T, PeerSync>) {
          peers_->sync(body, stream);
        } else if constexpr (std::is_same_v<T, Exchange>) {
          if (body.sends.empty() && body.recvs.empty()) return;
          for (size_t j = 0; j < body.sends.size(); ++j) {
            const PeerTransfer& t = body.sends[j];
            rt.sends[j] = SendOp{t.peer, address(bases, t.buffer, es), static_cast<size_t>(t.elements) * esz};
          }
          for (size_t j = 0; j < body.recvs.size(); ++j) {
            const PeerTransfer& t = body.recvs[j];
            rt.recvs[j] = RecvOp{t.peer, mutable_address(bases, t.buffer, es), static_cast<size_t>(t.elements) * esz};
          }
          comm_.exchange(rt.sends, rt.recvs, stream);
        } else if constexpr (std::is_same_v<T, CollectiveOp>) {
          if (body.elements == 0) return;
          const DType dtype = body.dtype.value_or(program_.dtype);
          const int ces = element_size(dtype);
          const void* send = address(bases, body.send, ces);
          void* recv = mutable_address(bases, body.recv, ces);
          const size_t n = static_cast<size_t>(body.elements);
          switch (body.kind) {
            case StepKind::kAllGather:
              return rt.group->all_gather(send, recv, n * static_cast<size_t>(ces), stream);
            case StepKind::kReduceScatter:
              return rt.group->reduce_scatter(send, recv, n, dtype, body.op, stream);
            case StepKind::kAllReduce:
              return rt.group->all_reduce(send, recv, n, dtype, body.op, stream);
            default:
              fail(ErrorKind::kInternal, "unexpected collective kind");
          }
        }
      },
      op.body);
}

void Executor::run(ConstBuffer input, MutableBuffer output, StreamHandle stream) {
  run(std::span<const ConstBuffer>(&input, 1), std::span<const MutableBuffer>(&output, 1), stream);
}

void Executor::run(std::span<const ConstBuffer> inputs, std::span<const MutableBuffer> outputs, StreamHandle stream) {
  const size_t n = tensors();
  RESHARD_REQUIRE(inputs.size() == n && outputs.size() == n, "run() got ", inputs.size(), " inputs and ",
                  outputs.size(), " outputs for ", n, n == 1 ? " tensor" : " tensors");
  const auto which = [&](size_t t) { return n == 1 ? std::string() : cat(" of tensor ", t); };
  for (size_t t = 0; t < n; ++t) {
    RESHARD_REQUIRE(inputs[t].bytes >= input_sizes_[t], "input buffer", which(t), " has ", inputs[t].bytes,
                    " bytes; rank ", program_.rank, "'s source tensor needs ", input_sizes_[t]);
    RESHARD_REQUIRE(outputs[t].bytes >= output_sizes_[t], "output buffer", which(t), " has ", outputs[t].bytes,
                    " bytes; rank ", program_.rank, "'s target tensor needs ", output_sizes_[t]);
  }
  using Clock = std::chrono::steady_clock;
  const Clock::time_point started = trace_ops_ ? Clock::now() : Clock::time_point{};
  const auto since = [](Clock::time_point t) {
    return std::chrono::duration<double, std::micro>(Clock::now() - t).count();
  };
  // Pointer checks ask the driver; repeated runs on the same buffers skip them.
  bool changed = !checked_;
  for (size_t t = 0; t < n && !changed; ++t) changed = inputs[t].data != inputs_[t] || outputs[t].data != outputs_[t];
  if (changed) {
    checked_ = false;
    for (size_t t = 0; t < n; ++t) {
      if (input_sizes_[t] > 0) device_.check_buffer(inputs[t].data, input_sizes_[t], "input");
      if (output_sizes_[t] > 0) device_.check_buffer(outputs[t].data, output_sizes_[t], "output");
    }
    check_aliasing(inputs, outputs);
    for (size_t t = 0; t < n; ++t) {
      inputs_[t] = inputs[t].data;
      outputs_[t] = outputs[t].data;
    }
  }
  // One-sided plans map the peers' buffers, collectively: on the first run, and when the program addresses the peers'
  // tensors on the runs options_.buffers_change names; the same runs on every rank.
  if (peers_ &&
      (!exposed_ || (program_.maps_peer_tensors && (changed || options_.buffers_change == BuffersChange::kAnyRank)))) {
    constexpr auto bit = [](Buffer b) { return 1u << static_cast<unsigned>(b); };
    auto* work = workspace_ ? static_cast<std::byte*>(workspace_->data()) : nullptr;
    for (size_t t = 0; t < n; ++t) {
      const bool addressed = !identity_tensor_[t];  // identity tensors have no operations, on any rank
      exposed_inputs_[t] = addressed && exposed_kinds_ & bit(Buffer::kInput) ? inputs_[t] : nullptr;
      exposed_outputs_[t] = addressed && exposed_kinds_ & bit(Buffer::kOutput) ? outputs_[t] : nullptr;
      // Tensor t's part of the workspace: from its offset to the next tensor's (null when empty: no address there).
      const std::vector<Index>& offsets = program_.tensor_work_offsets;
      const size_t begin = t < offsets.size() ? static_cast<size_t>(offsets[t]) : 0;
      const size_t end = t + 1 < offsets.size() ? static_cast<size_t>(offsets[t + 1]) : workspace_bytes_;
      exposed_works_[t] = exposed_kinds_ & bit(Buffer::kWork) && work && end > begin ? work + begin : nullptr;
    }
    if (!peers_->expose(ExposedBuffers{exposed_inputs_, exposed_outputs_, exposed_works_})) {
      checked_ = false;  // the next run checks and exposes again
      fail(ErrorKind::kUnmappable,
           "a buffer of this run on some rank is memory the other ranks cannot map (no CUDA "
           "IPC handle: an expandable segment or a stream-ordered pool); nothing was enqueued");
    }
    exposed_ = true;
  }
  checked_ = true;
  if (trace_ops_)
    std::fprintf(stderr, "rank %d: run: buffer checks and exposure %.1f us (buffers %s)\n", program_.rank,
                 since(started), changed ? "changed" : "as before");
  if (in_place_) return;  // identical layouts in place: the output already is the input
  const BufferBases bases{inputs_[0],
                          outputs_[0],
                          workspace_ ? workspace_->data() : nullptr,
                          peers_ ? peers_->tables() : PeerTables{},
                          inputs_.data(),
                          outputs_.data(),
                          program_.output_dtype ? element_size(*program_.output_dtype) : 0};
  if (identity_copies_needed_) identity_copies_->run(bases, stream);
  size_t i = 0;
  const Range run_range(device_, "reshard run");
  for (int step = 0; step < program_.step_count; ++step) {
    const Range step_range(device_, program_.step_names[static_cast<size_t>(step)].c_str());
    StepMarks* marks = options_.trace ? &marks_[step] : nullptr;
    if (marks) marks->start->record(stream);
    int comm_seen = 0;
    for (; i < program_.ops.size() && program_.ops[i].step == step; ++i) {
      const Op& op = program_.ops[i];
      const StreamHandle lane = op.lane == Lane::kMain ? stream : device_.lane(op.lane);
      for (int dep : op.after) ops_[dep].done->wait(lane);
      const bool traced_comm = marks && ops_[i].communicates && op.lane == Lane::kMain;
      if (traced_comm && comm_seen == 0) marks->comm_begin->record(stream);
      if (trace_ops_) {
        static constexpr const char* kKinds[] = {"mark",       "copies", "reductions", "exchange",
                                                 "collective", "sync",   "fused"};
        std::fprintf(stderr, "rank %d: op %zu %s lane %d\n", program_.rank, i, kKinds[op.body.index()],
                     static_cast<int>(op.lane));
      }
      const Clock::time_point op_started = trace_ops_ ? Clock::now() : Clock::time_point{};
      execute(i, bases, lane);
      if (traced_comm && ++comm_seen == marks->comm_ops) marks->comm_end->record(stream);
      if (ops_[i].done) ops_[i].done->record(lane);
      if (trace_ops_)
        std::fprintf(stderr, "rank %d: op %zu enqueued in %.1f us\n", program_.rank, i, since(op_started));
    }
    if (!marks) continue;
    if (marks->comm_ops == 0) {  // a step without communication is all "pack"
      marks->comm_begin->record(stream);
      marks->comm_end->record(stream);
    }
    marks->end->record(stream);
  }
}

void Executor::check_aliasing(std::span<const ConstBuffer> inputs, std::span<const MutableBuffer> outputs) {
  in_place_ = false;
  identity_copies_needed_ = false;
  for (size_t t = 0; t < inputs.size(); ++t) {
    const auto in = reinterpret_cast<std::uintptr_t>(inputs[t].data);
    const auto out = reinterpret_cast<std::uintptr_t>(outputs[t].data);
    const bool identity = program_.identity || identity_tensor_[t];
    if (input_sizes_[t] == 0 || output_sizes_[t] == 0 || in + input_sizes_[t] <= out || out + output_sizes_[t] <= in) {
      identity_copies_needed_ = identity_copies_needed_ || (identity_tensor_[t] && output_sizes_[t] > 0);
      continue;
    }
    RESHARD_REQUIRE(
        identity && in == out, "the output buffer", tensors() == 1 ? "" : cat(" of tensor ", t).c_str(),
        " overlaps the input buffer on rank ", program_.rank,
        "; only a plan between identical layouts (or such a tensor of a batch) runs in place (output == input)");
    in_place_ = program_.identity;
  }
}

void Executor::wait(StreamHandle stream) {
  std::string pending;  // the one-sided waits that had not passed at the timeout
  try {
    // On a timeout the one-sided waits are released first (no spin forever; the stream drains), then the
    // communicator aborts.
    if (peers_)
      comm_.wait_releasing(stream, options_.timeout, [&] { pending = peers_->release(); });
    else
      comm_.wait(stream, options_.timeout);
    if (peers_) peers_->check();
    if (log_ && options_.trace) {
      const std::vector<StepTime> times = step_times();
      for (size_t s = 0; s < times.size(); ++s)
        log_(cat("reshard: rank ", program_.rank, ": ", program_.step_names[s].substr(8), ": pack ", times[s].pack_us,
                 " us, communication ", times[s].comm_us, " us, unpack ", times[s].unpack_us, " us, total ",
                 times[s].total_us, " us"));
    }
  } catch (const Error& e) {
    if (pending.empty()) throw;
    fail(e.kind(), cat(e.what(), "; one-sided waits pending on rank ", program_.rank, ": ", pending));
  }
}

std::string Executor::abandon() { return peers_ ? peers_->release() : std::string(); }

std::vector<StepTime> Executor::step_times() const {
  std::vector<StepTime> out;
  if (in_place_) return out;  // the run had no steps to time
  for (const StepMarks& m : marks_) {
    StepTime t;
    t.pipelined = m.comm_ops > 1;
    t.pack_us = 1000.0 * m.comm_begin->elapsed_ms_since(*m.start);
    t.comm_us = 1000.0 * m.comm_end->elapsed_ms_since(*m.comm_begin);
    t.unpack_us = 1000.0 * m.end->elapsed_ms_since(*m.comm_end);
    t.total_us = 1000.0 * m.end->elapsed_ms_since(*m.start);
    out.push_back(t);
  }
  return out;
}

}  // namespace reshard
