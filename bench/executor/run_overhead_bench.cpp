// Host time of Executor::run (Google Benchmark): the executor's own loop over a rank's operations, on a backend
// whose calls return at once. What a real backend adds per call (CUDA launches, NCCL group calls, stream memory
// operations) comes on top and is measured on GPUs (`reshard run --graph` vs eager).
//
// Cases: rank 0 of a 4-rank plan, 2x2 [S0,S1] -> [S1,S0] of 1024x1024 f32, on each transport (nvlink separate
// copies and fused), and a 2-step collective plan.
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "reshard/backend.hpp"
#include "reshard/executor.hpp"
#include "reshard/planner.hpp"

namespace reshard {
namespace {

class NullBatch : public CopyBatch {
 public:
  void run(const BufferBases&, StreamHandle) override {}
};

class NullComm : public Communicator {
 public:
  NullComm(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void exchange(std::span<const SendOp>, std::span<const RecvOp>, StreamHandle) override {}
  void all_gather(const void*, void*, size_t, StreamHandle) override {}
  void reduce_scatter(const void*, void*, size_t, DType, ReduceOp, StreamHandle) override {}
  void all_reduce(const void*, void*, size_t, DType, ReduceOp, StreamHandle) override {}
  Communicator& group(const Mesh&, const std::vector<int>&) override { return *this; }
  void wait(StreamHandle, std::chrono::milliseconds) override {}
  void all_gather_host(const void* send, void* recv, size_t bytes) override {
    for (int r = 0; r < size_; ++r) std::memcpy(static_cast<std::byte*>(recv) + r * bytes, send, bytes);
  }

 private:
  int rank_, size_;
};

class NullPeers : public PeerLink {
 public:
  explicit NullPeers(int n) : peers_(n) {}
  bool expose(const ExposedBuffers& mine) override {
    // Every peer's buffers alias this rank's: nothing is read.
    const size_t tensors = mine.inputs.size();
    inputs_.clear();
    outputs_.clear();
    works_.clear();
    for (size_t p = 0; p < peers_.size(); ++p) {
      inputs_.insert(inputs_.end(), mine.inputs.begin(), mine.inputs.end());
      outputs_.insert(outputs_.end(), mine.outputs.begin(), mine.outputs.end());
      works_.insert(works_.end(), mine.works.begin(), mine.works.end());
      peers_[p] = RankBuffers{mine.inputs[0], mine.outputs[0], mine.works[0]};
    }
    tensors_ = tensors;
    return true;
  }
  PeerTables tables() const override {
    return PeerTables{peers_.data(), inputs_.data(), outputs_.data(), works_.data(), tensors_};
  }
  void require(int) const override {}
  bool copy_engines_reach(int) const override { return true; }
  void sync(const PeerSync&, StreamHandle) override {}
  std::string release() override { return {}; }
  std::unique_ptr<CopyBatch> prepare_fused(const FusedPeerStep&, DType, std::chrono::milliseconds) override {
    return std::make_unique<NullBatch>();
  }
  void check() override {}

 private:
  std::vector<RankBuffers> peers_;
  std::vector<const void*> inputs_;
  std::vector<void*> outputs_, works_;
  size_t tensors_ = 1;
};

class HeapMemory : public DeviceMemory {
 public:
  explicit HeapMemory(size_t bytes) : data_(bytes) {}
  void* data() override { return data_.data(); }
  size_t bytes() const override { return data_.size(); }

 private:
  std::vector<std::byte> data_;
};

class NullEvent : public DeviceEvent {
 public:
  void record(StreamHandle) override {}
  void wait(StreamHandle) override {}
  double elapsed_ms_since(const DeviceEvent&) const override { return 0; }
};

class NullDevice : public Device {
 public:
  explicit NullDevice(int n) : n_(n) {}
  std::unique_ptr<DeviceMemory> allocate(size_t bytes) override { return std::make_unique<HeapMemory>(bytes); }
  std::unique_ptr<DeviceEvent> create_event() override { return std::make_unique<NullEvent>(); }
  StreamHandle lane(Lane) override { return nullptr; }
  std::unique_ptr<CopyBatch> prepare_copies(const Copies&, int) override { return std::make_unique<NullBatch>(); }
  std::unique_ptr<CopyBatch> prepare_reductions(const std::vector<ReduceRegion>&, DType) override {
    return std::make_unique<NullBatch>();
  }
  void check_buffer(const void*, size_t, const char*) const override {}
  std::unique_ptr<PeerLink> connect_peers(Communicator&) override { return std::make_unique<NullPeers>(n_); }

 private:
  int n_;
};

struct Case {
  const char* name;
  Strategy strategy;
  Transport transport;
  Fusion fusion;
};
constexpr Case kCases[] = {{"p2p/nccl", Strategy::kP2P, Transport::kNccl, Fusion::kAuto},
                           {"p2p/nvlink", Strategy::kP2P, Transport::kNvlink, Fusion::kNever},
                           {"p2p/nvlink-fused", Strategy::kP2P, Transport::kNvlink, Fusion::kAlways},
                           {"collective", Strategy::kCollective, Transport::kAuto, Fusion::kAuto}};

void BM_RunHostTime(benchmark::State& state) {
  const Case& c = kCases[state.range(0)];
  const Layout src(Mesh({2, 2}), parse_placements("S0,S1"), Dims{1024, 1024});
  PlanOptions o;
  o.strategy = c.strategy;
  o.transport = c.transport;
  o.fusion = c.fusion;
  const Plan plan = make_plan(src, src.with_placements(parse_placements("S1,S0")), DType::kF32, o);
  NullComm comm(0, 4);
  NullDevice device(4);
  Executor exec(plan, comm, device);
  std::vector<std::byte> in(exec.input_bytes()), out(exec.output_bytes());
  for (auto _ : state) exec.run({in.data(), in.size()}, {out.data(), out.size()}, nullptr);
  state.SetLabel(std::string(c.name) + ", " + std::to_string(plan.steps().size()) + " steps");
}
BENCHMARK(BM_RunHostTime)->DenseRange(0, 3);

}  // namespace
}  // namespace reshard

BENCHMARK_MAIN();
