#include "reshard/executor.hpp"

namespace reshard {

struct Executor::StepRuntime {
  std::unique_ptr<CopyBatch> pack, local, unpack;
  std::vector<PeerTransfer> send_refs, recv_refs;
  std::vector<SendOp> sends;  // pointers filled in per run (no allocation)
  std::vector<RecvOp> recvs;
  std::optional<CollectiveOp> collective;
  Communicator* group = nullptr;
};

namespace {

std::unique_ptr<CopyBatch> prepare(Device& device, const std::vector<CopyRegion>& regions, int es) {
  return regions.empty() ? nullptr : device.prepare_copies(regions, es);
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
    rt.pack = prepare(device, ps.pack, es);
    rt.local = prepare(device, ps.local, es);
    rt.unpack = prepare(device, ps.unpack, es);
    rt.send_refs = ps.sends;
    rt.recv_refs = ps.recvs;
    rt.sends.resize(ps.sends.size());
    rt.recvs.resize(ps.recvs.size());
    rt.collective = ps.collective;
    if (ps.collective) rt.group = &comm.group(mesh, ps.collective->mesh_dims);
  }
}

Executor::~Executor() = default;

void Executor::run(ConstBuffer input, MutableBuffer output, StreamHandle stream) {
  RESHARD_REQUIRE(input.bytes >= input_bytes_, "input buffer has ", input.bytes, " bytes; rank ", program_.rank,
                  "'s source tensor needs ", input_bytes_);
  RESHARD_REQUIRE(output.bytes >= output_bytes_, "output buffer has ", output.bytes, " bytes; rank ", program_.rank,
                  "'s target tensor needs ", output_bytes_);
  if (input_bytes_ > 0) device_.check_buffer(input.data, input_bytes_, "input");
  if (output_bytes_ > 0) device_.check_buffer(output.data, output_bytes_, "output");
  const int es = element_size(program_.dtype);
  const size_t esz = static_cast<size_t>(es);
  BufferBases bases{input.data, output.data, workspace_ ? workspace_->data() : nullptr};
  for (StepRuntime& rt : steps_) {
    if (rt.pack) rt.pack->run(bases, stream);
    if (rt.local) rt.local->run_concurrent(bases, stream);
    if (!rt.sends.empty() || !rt.recvs.empty()) {
      for (size_t j = 0; j < rt.sends.size(); ++j) {
        const PeerTransfer& t = rt.send_refs[j];
        rt.sends[j] = SendOp{t.peer, address(bases, t.buffer, es), static_cast<size_t>(t.elements) * esz};
      }
      for (size_t j = 0; j < rt.recvs.size(); ++j) {
        const PeerTransfer& t = rt.recv_refs[j];
        rt.recvs[j] = RecvOp{t.peer, mutable_address(bases, t.buffer, es), static_cast<size_t>(t.elements) * esz};
      }
      comm_.exchange(rt.sends, rt.recvs, stream);
    }
    if (rt.collective && rt.collective->elements > 0) {
      const CollectiveOp& c = *rt.collective;
      const void* send = address(bases, c.send, es);
      void* recv = mutable_address(bases, c.recv, es);
      const size_t n = static_cast<size_t>(c.elements);
      switch (c.kind) {
        case StepKind::kAllGather:
          rt.group->all_gather(send, recv, n * esz, stream);
          break;
        case StepKind::kReduceScatter:
          rt.group->reduce_scatter(send, recv, n, program_.dtype, c.op, stream);
          break;
        case StepKind::kAllReduce:
          rt.group->all_reduce(send, recv, n, program_.dtype, c.op, stream);
          break;
        default:
          fail(ErrorKind::kInternal, "unexpected collective kind");
      }
    }
    if (rt.unpack) rt.unpack->run(bases, stream);
    if (rt.local) rt.local->join(stream);
  }
}

void Executor::wait(StreamHandle stream) { comm_.wait(stream, options_.timeout); }

}  // namespace reshard
