// The executor's one-sided (nvlink) peer copies on the host backend: copies the copy engines cannot reach run as
// kernels, and ranks of one process pull or push every placement pair, every element of every rank checked.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <utility>
#include <vector>

#include "forwarding_peer_link.hpp"
#include "host_runs.hpp"
#include "placement_sets.hpp"
#include "reshard/executor.hpp"
#include "reshard/host_backend.hpp"
#include "reshard/pattern.hpp"
#include "reshard/planner.hpp"
#include "test_plans.hpp"
#include "test_tier.hpp"

namespace reshard {
namespace {

// the executor must run the peer copies of nvlink steps as kernels, with the same result.
class NoEngineReach : public HostDevice {
 public:
  explicit NoEngineReach(std::atomic<int>& engine_peer_copies) : engine_peer_copies_(engine_peer_copies) {}
  std::unique_ptr<PeerLink> connect_peers(Communicator& comm) override {
    return std::make_unique<Link>(HostDevice::connect_peers(comm));
  }
  std::unique_ptr<CopyBatch> prepare_copies(const Copies& copies, int element_size) override {
    for (const CopyRegion& r : copies.regions)
      if (r.src.peer >= 0 && copies.engine == CopyEngine::kCopyEngine) ++engine_peer_copies_;
    return HostDevice::prepare_copies(copies, element_size);
  }

 private:
  class Link : public testing::ForwardingPeerLink {
   public:
    using ForwardingPeerLink::ForwardingPeerLink;
    bool copy_engines_reach(int) const override { return false; }
  };
  std::atomic<int>& engine_peer_copies_;
};

TEST(HostExecutor, PeerCopiesTheCopyEnginesCannotReachRunAsKernels) {
  // Rows of 4 KiB: the nvlink lowering gives the peer pulls to the copy engines.
  Layout src(Mesh({2}), parse_placements("S0"), Dims{64, 1024});
  Layout dst = src.with_placements(parse_placements("S1"));
  const Plan plan = testing::p2p_over_nvlink(src, dst, DType::kF32, Fusion::kNever);
  for (bool reach : {true, false}) {
    HostWorld world(2);
    std::atomic<Index> wrong{0};
    std::atomic<int> engine_peer_copies{0};
    run_ranks(
        2,
        [&](int r) {
          HostCommunicator comm(world, r);
          HostDevice plain;
          NoEngineReach no_reach(engine_peer_copies);
          Device& device = reach ? static_cast<Device&>(plain) : no_reach;
          ExecutorOptions pull;  // ranks of one process push by default: this test is about their pulls
          pull.one_sided_copies = OneSidedCopies::kPull;
          Executor exec(plan, comm, device, pull);
          std::vector<std::byte> in(exec.input_bytes()), out(exec.output_bytes(), std::byte{0xA5});
          fill_pattern(in.data(), src.box(r), src.global_shape(), DType::kF32);
          exec.run({in.data(), in.size()}, {out.data(), out.size()}, nullptr);
          wrong += count_mismatches(out.data(), dst.box(r), dst.global_shape(), DType::kF32);
        },
        &world);
    EXPECT_EQ(wrong.load(), 0) << "reach " << reach;
    EXPECT_TRUE(reach || engine_peer_copies.load() == 0) << engine_peer_copies.load();
  }
  // The same plan does give peer copies to the copy engines where they reach (the case above is not vacuous).
  std::atomic<int> counted{0};
  HostWorld world(2);
  run_ranks(
      2,
      [&](int r) {
        HostCommunicator comm(world, r);
        struct Counting : HostDevice {
          std::atomic<int>* n;
          std::unique_ptr<CopyBatch> prepare_copies(const Copies& c, int es) override {
            for (const CopyRegion& x : c.regions) *n += x.src.peer >= 0 && c.engine == CopyEngine::kCopyEngine;
            return HostDevice::prepare_copies(c, es);
          }
        } device;
        device.n = &counted;
        ExecutorOptions pull;
        pull.one_sided_copies = OneSidedCopies::kPull;
        Executor exec(plan, comm, device, pull);
      },
      &world);
  EXPECT_GT(counted.load(), 0);
}

// Ranks sharing a process pull or push (ExecutorOptions::one_sided_copies): pushed, every one-sided step without
// reductions copies into the readers' tensors instead of out of the sources'. Every placement pair over R/S0/S1/P on
// meshes (2), (4) and (2,2), sizes 0, 1 and uneven, separate and fused steps, both ways; every element of every rank
// checked, and the copies counted by direction (pulls write no peer, pushes write peers).
TEST(HostExecutor, OneSidedStepsEveryPairEveryElementPulledAndPushed) {
  struct Counting : HostDevice {
    std::atomic<int>* pushed = nullptr;
    std::unique_ptr<CopyBatch> prepare_copies(const Copies& c, int es) override {
      for (const CopyRegion& x : c.regions) *pushed += x.dst.peer >= 0;
      return HostDevice::prepare_copies(c, es);
    }
  };
  std::atomic<int> pushed_when_pulling{0}, pushed{0};
  int runs = 0;
  const long long stride = testing::sanitizer_stride(4);  // 4 placements per mesh dim
  long long index = 0;
  for (const std::vector<int>& mesh_shape : {std::vector<int>{2}, {4}, {2, 2}}) {
    const Mesh mesh(mesh_shape);
    for (const Dims& shape : {Dims{0, 3}, Dims{1, 1}, Dims{7, 10}}) {
      const std::vector<Placement> options{Placement::replicate(), Placement::shard(0), Placement::shard(1),
                                           Placement::partial()};
      for (const auto& from : testing::placement_lists(mesh.ndim(), options)) {
        for (const auto& to : testing::placement_lists(mesh.ndim(), options)) {
          if (!testing::in_tier(index++, stride)) continue;
          const Layout src(mesh, from, shape), dst(mesh, to, shape);
          for (const auto& [fusion, how] : {std::pair{Fusion::kNever, OneSidedCopies::kPull},
                                            {Fusion::kNever, OneSidedCopies::kPush},
                                            {Fusion::kAlways, OneSidedCopies::kPull},
                                            {Fusion::kAlways, OneSidedCopies::kPush}}) {
            PlanOptions o;
            o.strategy = Strategy::kP2P;
            o.transport = Transport::kNvlink;
            o.fusion = fusion;
            const Plan plan = make_plan(src, dst, DType::kF32, o);
            HostWorld world(mesh.world_size());
            std::atomic<Index> wrong{0};
            run_ranks(
                mesh.world_size(),
                [&](int r) {
                  HostCommunicator comm(world, r);
                  Counting device;
                  device.pushed = how == OneSidedCopies::kPush ? &pushed : &pushed_when_pulling;
                  ExecutorOptions eo;
                  eo.one_sided_copies = how;
                  Executor exec(plan, comm, device, eo);
                  std::vector<std::byte> in(exec.input_bytes()), out(exec.output_bytes(), std::byte{0x5A});
                  fill_local(in.data(), src, r, DType::kF32);
                  for (int call = 0; call < 2; ++call) {  // a second call reuses the flags and mappings
                    exec.run({in.data(), in.size()}, {out.data(), out.size()}, nullptr);
                    wrong += count_local_mismatches(out.data(), src, dst, r, DType::kF32);
                  }
                },
                &world);
            ASSERT_EQ(wrong.load(), 0) << mesh.str() << " " << to_string(from) << " -> " << to_string(to) << " "
                                       << to_string(shape) << " fusion " << static_cast<int>(fusion)
                                       << (how == OneSidedCopies::kPush ? " pushed" : " pulled");
            ++runs;
          }
        }
      }
    }
  }
  EXPECT_GT(pushed.load(), 0);
  EXPECT_EQ(pushed_when_pulling.load(), 0);
  EXPECT_GT(runs, 200);
}

}  // namespace
}  // namespace reshard
