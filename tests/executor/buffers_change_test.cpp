// ExecutorOptions::buffers_change: with kAnyRank, ranks of a one-sided plan may change their buffers on any run
// independently (one rank keeps its buffers, another gets new ones, as a caching allocator does): every run maps the
// peers' buffers collectively, and every element of every rank's result is right on every run. (With kTogether the
// same runs time out: the ranks that changed buffers wait in the mapping all-gather for those that did not.) Staged
// plans (PlanOptions::buffers_change) map once and take such changes under either setting; a hierarchical all_reduce
// with one-sided node stages planned for them maps on every run and is priced so.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "forwarding_peer_link.hpp"
#include "placement_sets.hpp"
#include "reshard/executor.hpp"
#include "reshard/host_backend.hpp"
#include "reshard/pattern.hpp"
#include "reshard/plan_json.hpp"
#include "reshard/planner.hpp"
#include "test_plans.hpp"

namespace reshard {
namespace {

// Counts the expose() calls of every rank (they must be equal: expose is collective).
class CountingDevice : public HostDevice {
 public:
  explicit CountingDevice(std::atomic<int>& exposes) : exposes_(exposes) {}
  std::unique_ptr<PeerLink> connect_peers(Communicator& comm) override {
    return std::make_unique<Link>(HostDevice::connect_peers(comm), exposes_);
  }

 private:
  class Link : public testing::ForwardingPeerLink {
   public:
    Link(std::unique_ptr<PeerLink> inner, std::atomic<int>& exposes)
        : ForwardingPeerLink(std::move(inner)), exposes_(exposes) {}
    bool expose(const ExposedBuffers& mine) override {
      ++exposes_;
      return ForwardingPeerLink::expose(mine);
    }

   private:
    std::atomic<int>& exposes_;
  };
  std::atomic<int>& exposes_;
};

// Rank r's buffers on run i: rank 0 keeps one pair for every run; the other ranks take a new pair on odd runs
// (fresh allocations, the old ones freed), so the ranks' pointer changes never line up.
constexpr int kRuns = 4;
bool keeps(int rank, int run) { return rank == 0 || run % 2 == 0; }

struct ChangingRuns {
  Index wrong = 0;  // wrong elements over every run of every rank
  int exposes = 0;  // expose() calls over every rank
};

// kRuns runs of `plan` on every rank, each rank changing its buffers as keeps() says, every element checked.
ChangingRuns run_changing(const Plan& plan, BuffersChange changes) {
  const Layout &src = plan.src(), &dst = plan.dst();
  const int n = static_cast<int>(src.mesh().size());
  HostWorld world(n);
  std::atomic<Index> wrong{0};
  std::atomic<int> exposes{0};
  run_ranks(
      n,
      [&](int r) {
        HostCommunicator comm(world, r);
        CountingDevice device(exposes);
        ExecutorOptions eo;
        eo.buffers_change = changes;
        Executor exec(plan, comm, device, eo);
        auto in = std::make_unique<std::vector<std::byte>>(exec.input_bytes());
        auto out = std::make_unique<std::vector<std::byte>>(exec.output_bytes());
        for (int run = 0; run < kRuns; ++run) {
          if (!keeps(r, run)) {
            in = std::make_unique<std::vector<std::byte>>(exec.input_bytes());
            out = std::make_unique<std::vector<std::byte>>(exec.output_bytes());
          }
          fill_pattern(in->data(), src.box(r), src.global_shape(), DType::kF32);
          std::fill(out->begin(), out->end(), std::byte{0xA5});
          exec.run({in->data(), in->size()}, {out->data(), out->size()}, nullptr);
          exec.wait(nullptr);
          wrong += count_mismatches(out->data(), dst.box(r), dst.global_shape(), DType::kF32);
        }
      },
      &world);
  return ChangingRuns{wrong.load(), exposes.load()};
}

// Every pair of R/S0/S1/P on meshes (2), (4), (2,2) at sizes 1x1, 7x5 (uneven) and 64x48: fn(src, dst, ranks).
template <class Fn>
void for_each_case(Fn fn) {
  for (const std::vector<int>& m : {std::vector<int>{2}, {4}, {2, 2}}) {
    const Mesh mesh(m);
    for (const Dims& shape : {Dims{1, 1}, Dims{7, 5}, Dims{64, 48}})
      for (const auto& from : testing::all_placements(mesh.ndim(), 2))
        for (const auto& to : testing::all_placements(mesh.ndim(), 2))
          fn(Layout(mesh, from, shape), Layout(mesh, to, shape), static_cast<int>(mesh.size()));
  }
}

TEST(BuffersChange, RanksChangingBuffersIndependentlyGetEveryElementRight) {
  const int expected_exposes_per_rank = kRuns;  // kAnyRank: every run maps
  for_each_case([&](const Layout& src, const Layout& dst, int n) {
    for (Fusion fusion : {Fusion::kNever, Fusion::kAlways}) {
      const Plan plan = testing::p2p_over_nvlink(src, dst, DType::kF32, fusion);
      const ChangingRuns got = run_changing(plan, BuffersChange::kAnyRank);
      const std::string what = src.str() + " -> [" + to_string(dst.placements()) + "]" +
                               (fusion == Fusion::kAlways ? " fused" : " separate copies");
      EXPECT_EQ(got.wrong, 0) << what;
      if (plan.transport() == Transport::kNvlink) {
        EXPECT_EQ(got.exposes, n * expected_exposes_per_rank) << what;
      }
    }
  });
}

// A staged plan (PlanOptions::buffers_change; Step::staged) reads only the peers' workspaces: each rank maps once, on
// its first run, and ranks may change their buffers on any run independently under either setting.
TEST(BuffersChange, StagedPlansMapOnceHoweverRanksChangeTheirBuffers) {
  Profile staging_always = default_profile();
  staging_always.nvlink.map_us = 1e9;
  int staged = 0;
  for_each_case([&](const Layout& src, const Layout& dst, int n) {
    for (BuffersChange changes : {BuffersChange::kTogether, BuffersChange::kAnyRank}) {
      PlanOptions o;
      o.strategy = Strategy::kP2P;
      o.transport = Transport::kNvlink;
      o.fusion = changes == BuffersChange::kTogether ? Fusion::kAlways : Fusion::kNever;
      o.buffers_change = true;
      o.profile = staging_always;
      const Plan plan = make_plan(src, dst, DType::kF32, o);
      if (plan.transport() != Transport::kNvlink || !plan.steps().front().staged) continue;
      ++staged;
      const ChangingRuns got = run_changing(plan, changes);
      const std::string what = src.str() + " -> [" + to_string(dst.placements()) + "]";
      EXPECT_EQ(got.wrong, 0) << what;
      EXPECT_EQ(got.exposes, n) << what;
    }
  });
  EXPECT_GT(staged, 100);
}

// kTogether (the default) maps only on runs whose buffers changed: on the same buffers, one mapping in all.
TEST(BuffersChange, TheDefaultMapsOnlyWhenBuffersChange) {
  const Layout src(Mesh({2}), parse_placements("S0"), Dims{64, 48});
  const Layout dst = src.with_placements(parse_placements("S1"));
  const Plan plan = testing::p2p_over_nvlink(src, dst, DType::kF32);
  HostWorld world(2);
  std::atomic<int> exposes{0};
  std::atomic<Index> wrong{0};
  run_ranks(
      2,
      [&](int r) {
        HostCommunicator comm(world, r);
        CountingDevice device(exposes);
        Executor exec(plan, comm, device);
        std::vector<std::byte> in(exec.input_bytes()), out(exec.output_bytes());
        fill_pattern(in.data(), src.box(r), src.global_shape(), DType::kF32);
        for (int run = 0; run < kRuns; ++run) {
          exec.run({in.data(), in.size()}, {out.data(), out.size()}, nullptr);
          exec.wait(nullptr);
          wrong += count_mismatches(out.data(), dst.box(r), dst.global_shape(), DType::kF32);
        }
      },
      &world);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(exposes.load(), 2);
}

// A hierarchical all_reduce whose node stages run one-sided (Step::mixed), planned for changing buffers: its price
// carries mapping the node members' new tensors (two per (rank, member) pair) on every call, so auto takes it where
// mapping is cheap beside NCCL's node stages and not where it is dear; taken, it runs right with ranks changing their
// buffers independently. P(max): every rank contributes the same pattern, whose maximum is the pattern.
TEST(BuffersChange, OneSidedNodeStagesPriceTheirMappingAndRunOnChangingBuffers) {
  const Layout src(Mesh({4}), parse_placements("P(max)"), Dims{128, 96});
  const Layout dst = src.with_placements(parse_placements("R"));
  auto options = [](double map_us, bool changing) {
    PlanOptions o;
    o.strategy = Strategy::kCollective;
    o.topology.ranks_per_node = 2;
    o.buffers_change = changing;
    o.profile.nvlink.map_us = map_us;
    // NCCL as slow within a node as between nodes (the two-node emulation's sockets), the link between nodes slower
    // still, so that at this size the split and its one-sided node stages pay.
    for (AlphaBeta* l : {&o.profile.inter_node.all_reduce, &o.profile.inter_node.reduce_scatter,
                         &o.profile.inter_node.all_gather, &o.profile.inter_node.p2p})
      l->bandwidth_GBps /= 400;
    for (AlphaBeta* l : {&o.profile.intra_node.all_reduce, &o.profile.intra_node.reduce_scatter,
                         &o.profile.intra_node.all_gather, &o.profile.intra_node.p2p}) {
      l->samples.clear();
      l->bandwidth_GBps /= 100;
      l->alpha_us += 100;
    }
    return o;
  };
  const PlanOptions cheap_options = options(1, true);
  const Plan fixed = make_plan(src, dst, DType::kF32, options(1, false));
  const Plan cheap = make_plan(src, dst, DType::kF32, cheap_options);
  const Plan dear = make_plan(src, dst, DType::kF32, options(1e6, true));
  ASSERT_EQ(cheap.steps().size(), 1u);
  EXPECT_TRUE(fixed.steps()[0].hierarchical && fixed.steps()[0].mixed) << plan_to_json(fixed);
  EXPECT_TRUE(cheap.steps()[0].hierarchical && cheap.steps()[0].mixed) << plan_to_json(cheap);
  // 4 ranks each read 1 node member's contribution and reduced piece: 8 mappings of 1 us.
  EXPECT_NEAR(cheap.estimated_us() - fixed.estimated_us(), 8.0, 1e-6);
  EXPECT_FALSE(dear.steps()[0].mixed) << plan_to_json(dear);
  // A plan file says the same: reloaded with the same profile, priced alike.
  EXPECT_NEAR(plan_from_json(plan_to_json(cheap), cheap_options.profile).estimated_us(), cheap.estimated_us(), 1e-6);
  const ChangingRuns got = run_changing(cheap, BuffersChange::kAnyRank);
  EXPECT_EQ(got.wrong, 0);
  EXPECT_EQ(got.exposes, 4 * kRuns);
}

}  // namespace
}  // namespace reshard
