// The host backend's one-sided access: ranks are threads of one process, so a peer's buffers are plain pointers, and
// the ordering flags are counters in the host world. Work is done when enqueued, so sync() blocks the calling rank
// until its peers posted (with the world's timeout).
#include <vector>

#include "reshard/host_backend.hpp"

namespace reshard {
namespace {

class HostPeerLink : public PeerLink {
  class Fused : public CopyBatch {
   public:
    Fused(HostPeerLink& link, const FusedPeerStep& op, std::unique_ptr<CopyBatch> work)
        : link_(link), ready_(op.ready), done_(op.done), work_(std::move(work)) {}
    void run(const BufferBases& bases, StreamHandle stream) override {
      link_.sync(ready_, stream);
      work_->run(bases, stream);
      link_.sync(done_, stream);
    }

   private:
    HostPeerLink& link_;
    PeerSync ready_, done_;
    std::unique_ptr<CopyBatch> work_;  // the step's copies or its reductions
  };

 public:
  explicit HostPeerLink(HostCommunicator& comm) : comm_(comm), peers_(comm.size()) {
    for (int phase = 0; phase < 2; ++phase) awaited_[phase].assign(comm.size(), 0);
  }

  // Every rank's pointers: [inputs..., outputs..., works...] per rank.
  bool expose(const ExposedBuffers& mine) override {
    const size_t tensors = mine.inputs.size(), n = peers_.size();
    RESHARD_REQUIRE(mine.outputs.size() == tensors && mine.works.size() == tensors && tensors >= 1,
                    "internal: an exposure of ", tensors, " inputs, ", mine.outputs.size(), " outputs and ",
                    mine.works.size(), " workspaces");
    std::vector<const void*> record(mine.inputs.begin(), mine.inputs.end());
    record.insert(record.end(), mine.outputs.begin(), mine.outputs.end());
    record.insert(record.end(), mine.works.begin(), mine.works.end());
    std::vector<const void*> all(3 * tensors * n);
    comm_.all_gather_host(record.data(), all.data(), record.size() * sizeof(const void*));
    tensors_ = tensors;
    inputs_.assign(n * tensors, nullptr);
    outputs_.assign(n * tensors, nullptr);
    works_.assign(n * tensors, nullptr);
    for (size_t p = 0; p < n; ++p) {
      for (size_t t = 0; t < tensors; ++t) {
        inputs_[p * tensors + t] = all[p * 3 * tensors + t];
        outputs_[p * tensors + t] = const_cast<void*>(all[p * 3 * tensors + tensors + t]);
        works_[p * tensors + t] = const_cast<void*>(all[p * 3 * tensors + 2 * tensors + t]);
      }
      peers_[p] = RankBuffers{inputs_[p * tensors], outputs_[p * tensors], works_[p * tensors]};
    }
    return true;
  }
  PeerTables tables() const override {
    return PeerTables{peers_.data(), inputs_.data(), outputs_.data(), works_.data(), tensors_};
  }
  void require(int) const override {}  // one process: every rank's memory is this process's
  bool copy_engines_reach(int) const override { return true; }

  void sync(const PeerSync& sync, StreamHandle) override {
    const int phase = static_cast<int>(sync.phase);
    HostWorld& world = comm_.world();
    const int me = comm_.world_rank(comm_.rank());
    for (int p : sync.notify) world.post_signal(comm_.context(), me, comm_.world_rank(p), phase);
    for (int p : sync.await) world.await_signal(comm_.context(), comm_.world_rank(p), me, phase, ++awaited_[phase][p]);
  }

  std::string release() override {
    comm_.world().release_signals(comm_.world_rank(comm_.rank()));
    return {};
  }

  // The host runs a fused step as what it stands for: ready, the copies or the reductions, done.
  std::unique_ptr<CopyBatch> prepare_fused(const FusedPeerStep& op, DType dtype,
                                           std::chrono::milliseconds timeout) override {
    return prepare_fused(op, dtype, dtype, timeout);
  }
  // Converting (backend.hpp): the copies or reductions convert what they write into an output buffer.
  std::unique_ptr<CopyBatch> prepare_fused(const FusedPeerStep& op, DType dtype, DType output_dtype,
                                           std::chrono::milliseconds) override {
    HostDevice device;
    return std::make_unique<Fused>(*this, op,
                                   op.reduce.empty() ? device.prepare_copies(Copies{op.regions}, dtype, output_dtype)
                                                     : device.prepare_reductions(op.reduce, dtype, output_dtype));
  }
  void check() override {}  // waits throw on timeout themselves

 private:
  HostCommunicator& comm_;
  std::vector<RankBuffers> peers_;
  std::vector<const void*> inputs_;  // [peer * tensors + tensor]
  std::vector<void*> outputs_, works_;
  size_t tensors_ = 1;
  std::vector<std::uint64_t> awaited_[2];  // per phase and peer: how many posts this rank has waited for
};

}  // namespace

std::unique_ptr<PeerLink> HostDevice::connect_peers(Communicator& comm) {
  auto* host = dynamic_cast<HostCommunicator*>(&comm);
  RESHARD_REQUIRE(host != nullptr, "the host device reaches its peers through a host communicator");
  return std::make_unique<HostPeerLink>(*host);
}

}  // namespace reshard
