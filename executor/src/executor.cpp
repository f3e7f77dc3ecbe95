#include "reshard/executor.hpp"

namespace reshard {

struct Executor::StageRuntime {
  std::unique_ptr<CopyBatch> pack, unpack, reduce;
  std::vector<PeerTransfer> send_refs, recv_refs;
  std::vector<SendOp> sends;  // pointers filled in per run (no allocation)
  std::vector<RecvOp> recvs;
  std::optional<CollectiveOp> collective;
  Communicator* group = nullptr;
  std::unique_ptr<DeviceEvent> packed, received;  // pipelined steps only
  std::unique_ptr<DeviceEvent> sent, drained;     // pipelined: communication done, unpack done (slot reusable)
  bool unpacks() const { return unpack || reduce; }
  void run_unpack(const BufferBases& bases, StreamHandle stream) const {
    if (unpack) unpack->run(bases, stream);
    if (reduce) reduce->run(bases, stream);
  }
};

struct Executor::StepRuntime {
  std::unique_ptr<CopyBatch> local;  // overlapped on the local-copy lane (large local copies only)
  std::vector<StageRuntime> stages;
  std::unique_ptr<DeviceEvent> fork, local_done, unpacked;
  std::unique_ptr<DeviceEvent> marks[4];  // trace: start, packed, communicated, end
  bool pipelined() const { return stages.size() > 1; }
};

namespace {

// Local copies up to this size ride along with the pack kernel on the main stream: forking a lane costs more than
// the overlap saves.
constexpr Index kOverlapLocalBytes = 4 << 20;

std::unique_ptr<CopyBatch> prepare(Device& device, const std::vector<CopyRegion>& regions, int es, bool lane = false) {
  if (regions.empty()) return nullptr;
  return lane ? device.prepare_lane_copies(regions, es) : device.prepare_copies(regions, es);
}

const void* address(const BufferBases& b, const BufferRef& ref, int es) {
  const void* base = ref.buffer == Buffer::kInput ? b.input : ref.buffer == Buffer::kOutput ? b.output : b.work;
  return static_cast<const std::byte*>(base) + ref.offset * es;
}

void* mutable_address(const BufferBases& b, const BufferRef& ref, int es) {
  RESHARD_REQUIRE(ref.buffer != Buffer::kInput, "internal: a program writes into its input");
  return static_cast<std::byte*>(ref.buffer == Buffer::kOutput ? b.output : b.work) + ref.offset * es;
}

}  // namespace

Executor::Executor(const Plan& plan, Communicator& comm, Device& device, ExecutorOptions options)
    : comm_(comm), device_(device), options_(options) {
  const Mesh& mesh = plan.src().mesh();
  RESHARD_REQUIRE(comm.size() == mesh.size(), "the communicator has ", comm.size(), " ranks but the plan's mesh ",
                  mesh.str(), " has ", mesh.size());
  program_ = lower(plan, comm.rank());
  const int es = element_size(program_.dtype);
  input_bytes_ = static_cast<size_t>(program_.input_elements) * es;
  output_bytes_ = static_cast<size_t>(program_.output_elements) * es;
  workspace_bytes_ = static_cast<size_t>(program_.work_elements) * es;
  if (workspace_bytes_ > 0) workspace_ = device.allocate(workspace_bytes_);
  // Group communicators, in the program's first-use order (the same on every rank).
  for (const std::vector<int>& dims : program_.communicator_dims) comm.group(mesh, dims);
  steps_.resize(program_.steps.size());
  for (size_t i = 0; i < program_.steps.size(); ++i) {
    const ProgramStep& ps = program_.steps[i];
    StepRuntime& rt = steps_[i];
    const bool overlap_local = !ps.stages.empty() && copy_elements(ps.local) * es > kOverlapLocalBytes;
    if (overlap_local) rt.local = prepare(device, ps.local, es, true);
    rt.stages.resize(ps.stages.size());
    for (size_t s = 0; s < ps.stages.size(); ++s) {
      const Stage& st = ps.stages[s];
      StageRuntime& sr = rt.stages[s];
      const bool pipelined = ps.stages.size() > 1 && options_.stage_overlap == StageOverlap::kLanes;
      std::vector<CopyRegion> pack = st.pack;
      if (s == 0 && !overlap_local) pack.insert(pack.end(), ps.local.begin(), ps.local.end());  // one launch
      sr.pack = prepare(device, pack, es, pipelined);
      sr.unpack = prepare(device, st.unpack, es, pipelined);
      if (!st.reduce.empty()) sr.reduce = device.prepare_reductions(st.reduce, program_.dtype);
      sr.send_refs = st.sends;
      sr.recv_refs = st.recvs;
      sr.sends.resize(st.sends.size());
      sr.recvs.resize(st.recvs.size());
      sr.collective = st.collective;
      if (st.collective) sr.group = &comm.group(mesh, st.collective->mesh_dims);
      if (ps.stages.size() > 1) {
        sr.packed = device.create_event();
        sr.received = device.create_event();
        sr.sent = device.create_event();
        sr.drained = device.create_event();
      }
    }
    if (ps.stages.empty() && !ps.local.empty())
      rt.stages.emplace_back().pack = prepare(device, ps.local, es);  // local step
    if (rt.local || rt.pipelined()) rt.fork = device.create_event();
    if (rt.local) rt.local_done = device.create_event();
    if (rt.pipelined()) rt.unpacked = device.create_event();
    if (options_.trace)
      for (auto& m : rt.marks) m = device.create_event();
  }
}

Executor::~Executor() = default;

void Executor::run(ConstBuffer input, MutableBuffer output, StreamHandle stream) {
  RESHARD_REQUIRE(input.bytes >= input_bytes_, "input buffer has ", input.bytes, " bytes; rank ", program_.rank,
                  "'s source tensor needs ", input_bytes_);
  RESHARD_REQUIRE(output.bytes >= output_bytes_, "output buffer has ", output.bytes, " bytes; rank ", program_.rank,
                  "'s target tensor needs ", output_bytes_);
  // Pointer checks ask the driver; repeated runs on the same buffers skip them.
  if (input.data != checked_input_ || output.data != checked_output_) {
    if (input_bytes_ > 0) device_.check_buffer(input.data, input_bytes_, "input");
    if (output_bytes_ > 0) device_.check_buffer(output.data, output_bytes_, "output");
    checked_input_ = input.data;
    checked_output_ = output.data;
  }
  const int es = element_size(program_.dtype);
  const size_t esz = static_cast<size_t>(es);
  const BufferBases bases{input.data, output.data, workspace_ ? workspace_->data() : nullptr};

  // One stage's communication, on `stream`.
  auto communicate = [&](StageRuntime& sr) {
    if (!sr.sends.empty() || !sr.recvs.empty()) {
      for (size_t j = 0; j < sr.sends.size(); ++j) {
        const PeerTransfer& t = sr.send_refs[j];
        sr.sends[j] = SendOp{t.peer, address(bases, t.buffer, es), static_cast<size_t>(t.elements) * esz};
      }
      for (size_t j = 0; j < sr.recvs.size(); ++j) {
        const PeerTransfer& t = sr.recv_refs[j];
        sr.recvs[j] = RecvOp{t.peer, mutable_address(bases, t.buffer, es), static_cast<size_t>(t.elements) * esz};
      }
      comm_.exchange(sr.sends, sr.recvs, stream);
    }
    if (sr.collective && sr.collective->elements > 0) {
      const CollectiveOp& c = *sr.collective;
      const void* send = address(bases, c.send, es);
      void* recv = mutable_address(bases, c.recv, es);
      const size_t n = static_cast<size_t>(c.elements);
      switch (c.kind) {
        case StepKind::kAllGather:
          sr.group->all_gather(send, recv, n * esz, stream);
          break;
        case StepKind::kReduceScatter:
          sr.group->reduce_scatter(send, recv, n, program_.dtype, c.op, stream);
          break;
        case StepKind::kAllReduce:
          sr.group->all_reduce(send, recv, n, program_.dtype, c.op, stream);
          break;
        default:
          fail(ErrorKind::kInternal, "unexpected collective kind");
      }
    }
  };
  // Marks the step's fork point on `stream` (when a side stream will start from it) and starts large local copies on
  // their lane from there, overlapping what follows.
  auto start_local = [&](StepRuntime& rt) {
    if (rt.fork) rt.fork->record(stream);
    if (!rt.local) return;
    StreamHandle lane = device_.lane(Lane::kLocalCopy);
    rt.fork->wait(lane);
    rt.local->run(bases, lane);
    rt.local_done->record(lane);
  };
  auto mark = [&](StepRuntime& rt, int i) {
    if (options_.trace) rt.marks[i]->record(stream);
  };

  for (StepRuntime& rt : steps_) {
    mark(rt, 0);
    if (rt.pipelined() && options_.stage_overlap == StageOverlap::kSerial) {
      // Stage after stage on the main stream; large local copies overlap them on their lane.
      start_local(rt);
      for (StageRuntime& st : rt.stages) {
        if (st.pack) st.pack->run(bases, stream);
        communicate(st);
        st.run_unpack(bases, stream);
      }
      mark(rt, 1);
      mark(rt, 2);
    } else if (!rt.pipelined()) {
      // Pack (with small local copies) -> large local copies start on their lane, overlapping the communication
      // (not the pack, which would compete for memory bandwidth) -> communication -> unpack.
      StageRuntime* sr = rt.stages.empty() ? nullptr : &rt.stages.front();
      if (sr && sr->pack) sr->pack->run(bases, stream);
      mark(rt, 1);
      start_local(rt);
      if (sr) communicate(*sr);
      mark(rt, 2);
      if (sr) sr->run_unpack(bases, stream);
    } else {
      // Stage s is packed on the pack lane while stage s-1 is on the wire; stage s is unpacked on the unpack lane
      // while stage s+1 is on the wire; large local copies overlap everything. Stages s and s-2 share a scratch
      // slot (chunking.hpp): stage s packs once stage s-2 has sent, and receives once stage s-2 is unpacked.
      start_local(rt);
      StreamHandle pack_lane = device_.lane(Lane::kPack), unpack_lane = device_.lane(Lane::kUnpack);
      rt.fork->wait(pack_lane);
      bool any_unpack = false;
      for (size_t s = 0; s < rt.stages.size(); ++s) {
        StageRuntime& st = rt.stages[s];
        StageRuntime* reuse = s >= 2 ? &rt.stages[s - 2] : nullptr;
        if (st.pack) {
          if (reuse) reuse->sent->wait(pack_lane);
          st.pack->run(bases, pack_lane);
          st.packed->record(pack_lane);
          st.packed->wait(stream);
        }
        if (reuse && reuse->unpacks()) reuse->drained->wait(stream);
        communicate(st);
        st.sent->record(stream);
        if (st.unpacks()) {
          st.received->record(stream);
          st.received->wait(unpack_lane);
          st.run_unpack(bases, unpack_lane);
          st.drained->record(unpack_lane);
          any_unpack = true;
        }
      }
      mark(rt, 1);
      mark(rt, 2);
      if (any_unpack) {
        rt.unpacked->record(unpack_lane);
        rt.unpacked->wait(stream);
      }
    }
    if (rt.local) rt.local_done->wait(stream);
    mark(rt, 3);
  }
}

void Executor::wait(StreamHandle stream) { comm_.wait(stream, options_.timeout); }

std::vector<StepTime> Executor::step_times() const {
  std::vector<StepTime> out;
  if (!options_.trace) return out;
  for (const StepRuntime& rt : steps_) {
    StepTime t;
    t.pipelined = rt.pipelined();
    t.pack_us = 1000.0 * rt.marks[1]->elapsed_ms_since(*rt.marks[0]);
    t.comm_us = 1000.0 * rt.marks[2]->elapsed_ms_since(*rt.marks[1]);
    t.unpack_us = 1000.0 * rt.marks[3]->elapsed_ms_since(*rt.marks[2]);
    t.total_us = 1000.0 * rt.marks[3]->elapsed_ms_since(*rt.marks[0]);
    out.push_back(t);
  }
  return out;
}

}  // namespace reshard
