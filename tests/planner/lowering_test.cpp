// Lowering: every rank's program stays inside its buffers, moves exactly its transfers, and needs no more
// workspace than the plan priced (the largest rank needs exactly that).
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <tuple>

#include "reshard/plan_batch.hpp"
#include "reshard/planner.hpp"
#include "reshard/program.hpp"
#include "test_plans.hpp"
#include "test_tier.hpp"

namespace reshard {
namespace {

Index buffer_size(const RankProgram& p, Buffer b) {
  return b == Buffer::kInput ? p.input_elements : b == Buffer::kOutput ? p.output_elements : p.work_elements;
}

// The last element a strided view touches, plus one.
Index extent(const CopyRegion& r, bool src) {
  const Dims& strides = src ? r.src_strides : r.dst_strides;
  Index last = 0;
  for (int d = 0; d < r.shape.size(); ++d) last += (r.shape[d] - 1) * strides[d];
  return (src ? r.src.offset : r.dst.offset) + last + 1;
}

// The operations of one step whose body is a T.
template <class T>
std::vector<const T*> bodies(const RankProgram& p, int step) {
  std::vector<const T*> out;
  for (const Op& op : p.ops)
    if (op.step == step)
      if (const T* b = std::get_if<T>(&op.body)) out.push_back(b);
  return out;
}

// Ordering is explicit and complete: every wait names an earlier operation on another lane, and every side-lane
// operation is followed, on the main lane, by an operation that waits for it or for a later one of its lane.
void check_order(const RankProgram& p, const std::string& where) {
  for (size_t i = 0; i < p.ops.size(); ++i) {
    for (int dep : p.ops[i].after) {
      ASSERT_GE(dep, 0) << where;
      ASSERT_LT(static_cast<size_t>(dep), i) << where;
      ASSERT_NE(p.ops[dep].lane, p.ops[i].lane) << where << ": op " << i << " waits for its own lane";
    }
    if (i > 0) {
      ASSERT_GE(p.ops[i].step, p.ops[i - 1].step) << where;
    }
  }
  for (size_t i = 0; i < p.ops.size(); ++i) {
    if (p.ops[i].lane == Lane::kMain) continue;
    bool joined = false;
    for (size_t j = i + 1; j < p.ops.size() && !joined; ++j) {
      if (p.ops[j].lane != Lane::kMain || p.ops[j].step != p.ops[i].step) continue;
      for (int dep : p.ops[j].after)
        joined = joined || (dep >= static_cast<int>(i) && p.ops[dep].lane == p.ops[i].lane);
    }
    EXPECT_TRUE(joined) << where << ": side-lane op " << i << " is never joined into the main lane in its step";
  }
}

// Checks rank p's program against the plan; `all` holds every rank's program (one-sided steps read peers' buffers).
void check_program(const Plan& plan, const RankProgram& p, const std::vector<RankProgram>& all,
                   const std::string& where) {
  check_order(p, where);
  auto size_of = [&](const BufferRef& ref) { return buffer_size(ref.peer < 0 ? p : all[ref.peer], ref.buffer); };
  for (int i = 0; i < p.step_count; ++i) {
    Index sent = 0, received = 0;
    for (const Exchange* x : bodies<Exchange>(p, i)) {
      for (const auto* list : {&x->sends, &x->recvs})
        for (const PeerTransfer& t : *list)
          ASSERT_LE(t.buffer.offset + t.elements, buffer_size(p, t.buffer.buffer)) << where;
      for (const PeerTransfer& t : x->sends) sent += t.elements;
      for (const PeerTransfer& t : x->recvs) received += t.elements;
    }
    // Copy regions of separate copy batches and of fused peer-copy kernels obey the same rules.
    std::vector<const std::vector<CopyRegion>*> lists;
    for (const Copies* c : bodies<Copies>(p, i)) lists.push_back(&c->regions);
    for (const FusedPeerStep* f : bodies<FusedPeerStep>(p, i)) lists.push_back(&f->regions);
    for (const auto* list : lists) {
      for (const CopyRegion& r : *list) {
        ASSERT_EQ(r.src_strides[r.shape.size() - 1], 1) << where;
        ASSERT_EQ(r.dst_strides[r.shape.size() - 1], 1) << where;
        ASSERT_LE(extent(r, true), size_of(r.src)) << where << " step " << i;
        ASSERT_LE(extent(r, false), size_of(r.dst)) << where << " step " << i;
        ASSERT_LT(r.dst.peer, 0) << where << ": a copy writes into a peer's buffer";
        if (r.src.peer >= 0) received += r.shape.product();  // one-sided: pulled from the peer
      }
    }
    // One-sided steps: what this rank sends is what the others pull from it.
    for (const RankProgram& q : all) {
      for (const Copies* c : bodies<Copies>(q, i))
        for (const CopyRegion& r : c->regions)
          if (r.src.peer == p.rank) sent += r.shape.product();
      for (const FusedPeerStep* f : bodies<FusedPeerStep>(q, i))
        for (const CopyRegion& r : f->regions)
          if (r.src.peer == p.rank) sent += r.shape.product();
    }
    if (plan.steps()[i].kind == StepKind::kP2P) {
      Index want_sent = 0, want_received = 0;
      for (const Transfer& t : plan.steps()[i].transfers) {
        if (!t.is_local() && t.src == p.rank) want_sent += volume(t.region);
        if (!t.is_local() && t.dst == p.rank) want_received += volume(t.region);
      }
      EXPECT_EQ(sent, want_sent) << where;
      EXPECT_EQ(received, want_received) << where;
    }
  }
}

TEST(Lowering, ProgramsFitTheirBuffersAndThePricedWorkspace) {
  const std::vector<std::vector<int>> meshes = {{2}, {3}, {2, 2}, {2, 3}, {2, 2, 2}};
  const std::vector<Dims> shapes = {{7, 5}, {1, 9}, {8, 8}, {0, 4}, {16, 3}};
  const char* options[] = {"R", "S0", "S1"};
  for (const auto& m : meshes) {
    Mesh mesh(m);
    int combos = 1;
    for (size_t k = 0; k < m.size(); ++k) combos *= 3;
    const long long stride = testing::tier_stride(combos * combos, 150, combos);  // fast tier: <= 150 pairs a mesh
    for (int a = 0; a < combos; ++a) {
      for (int b = 0; b < combos; ++b) {
        if (!testing::in_tier(a * combos + b, stride)) continue;
        std::vector<Placement> pa, pb;
        for (int k = 0, x = a, y = b; k < mesh.ndim(); ++k, x /= 3, y /= 3) {
          pa.push_back(parse_placement(options[x % 3]));
          pb.push_back(parse_placement(options[y % 3]));
        }
        for (const Dims& shape : shapes) {
          Layout src(mesh, pa, shape), dst(mesh, pb, shape);
          for (auto [s, t] :
               {std::pair{Strategy::kCollective, Transport::kNccl}, std::pair{Strategy::kP2P, Transport::kNccl},
                std::pair{Strategy::kP2P, Transport::kNvlink}, std::pair{Strategy::kHybrid, Transport::kNccl},
                std::pair{Strategy::kHybrid, Transport::kNvlink}}) {
            PlanOptions o;
            o.strategy = s;
            o.transport = t;
            o.pipeline_chunk_bytes = (a + b) % 2 ? 16 << 20 : 8;  // tiny chunks: pipelined steps too
            o.topology.ranks_per_node = 2;
            o.fusion = (a + b) % 3 ? Fusion::kAuto : Fusion::kNever;  // fused kernels and separate copies
            o.buffers_change = (a + 2 * b) % 3 == 0;                  // staged first steps too
            std::optional<Plan> plan;
            try {
              plan.emplace(make_plan(src, dst, DType::kBF16, o));
            } catch (const Error&) {
              // Only hybrid may be unavailable, and nvlink where the mesh spans nodes (2 ranks per node here).
              ASSERT_TRUE(s == Strategy::kHybrid || (t == Transport::kNvlink && mesh.size() > 2)) << src.str();
              continue;
            }
            Index peak = 0;
            std::vector<RankProgram> all;
            for (int r = 0; r < mesh.size(); ++r) all.push_back(lower(*plan, r));
            for (int r = 0; r < mesh.size(); ++r) {
              const RankProgram& p = all[r];
              std::string where = cat(src.str(), " -> [", to_string(pb), "] ", to_string(s), " rank ", r);
              EXPECT_EQ(p.input_elements, src.local_volume(r)) << where;
              EXPECT_EQ(p.output_elements, dst.local_volume(r)) << where;
              check_program(*plan, p, all, where);
              peak = std::max(peak, p.work_elements * 2);
            }
            EXPECT_EQ(peak, plan->peak_workspace_bytes())
                << src.str() << " -> " << to_string(pb) << " " << to_string(s) << " " << to_string(t);
          }
        }
      }
    }
  }
}

// A staged first step (PlanOptions::buffers_change) reads only the peers' workspaces: a sending rank's first operation
// copies its whole source tensor to the start of its step scratch, before it posts ready; ranks that send nothing
// stage nothing; the workspace holds the copy.
TEST(Lowering, StagedFirstStepsReadOnlyThePeersWorkspaces) {
  Profile staging_always = default_profile();
  staging_always.nvlink.map_us = 1e9;
  for (const auto& [m, from, to] : {std::tuple{std::vector<int>{2}, "S0", "S1"},
                                    {std::vector<int>{4}, "S0", "R"},
                                    {std::vector<int>{2, 2}, "S0,S1", "S1,S0"},
                                    {std::vector<int>{2}, "P", "R"},
                                    {std::vector<int>{4}, "R", "S0"},
                                    {std::vector<int>{2, 2}, "S0,R", "R,S1"}}) {
    const Layout src(Mesh(m), parse_placements(from), Dims{8, 12});
    const Layout dst = src.with_placements(parse_placements(to));
    for (Fusion fusion : {Fusion::kNever, Fusion::kAlways}) {
      PlanOptions o;
      o.strategy = Strategy::kP2P;
      o.transport = Transport::kNvlink;
      o.fusion = fusion;
      o.buffers_change = true;
      o.profile = staging_always;
      const Plan plan = make_plan(src, dst, DType::kF32, o);
      const std::string what = cat(src.str(), " -> [", to, "] ", fusion == Fusion::kAlways ? "fused" : "separate");
      const bool moves = plan.bytes_moved() > 0;
      ASSERT_EQ(plan.steps().front().staged, moves) << what;
      for (int r = 0; r < src.mesh().size(); ++r) {
        const RankProgram p = lower(plan, r);
        bool sends = false;
        for (const Transfer& t : plan.steps().front().transfers) sends = sends || (!t.is_local() && t.src == r);
        const Copies* stage = p.ops.empty() ? nullptr : std::get_if<Copies>(&p.ops.front().body);
        const bool staged =
            sends && stage && stage->regions.size() == 1 && stage->regions[0].src == BufferRef{Buffer::kInput, 0} &&
            stage->regions[0].dst.buffer == Buffer::kWork && stage->regions[0].shape.product() == p.input_elements;
        EXPECT_EQ(staged, sends) << what << " rank " << r;
        if (moves) {
          EXPECT_GE(p.work_elements, p.input_elements) << what << " rank " << r;
        }
        // Fused, the step is one FusedPeerStep: copies, or reductions from a Partial source (never both).
        int fused_ops = 0;
        for (const Op& op : p.ops) {
          if (const auto* f = std::get_if<FusedPeerStep>(&op.body)) {
            ++fused_ops;
            EXPECT_TRUE(f->regions.empty() || f->reduce.empty()) << what << " rank " << r;
            EXPECT_EQ(!f->reduce.empty(), src.placements()[0].is_partial()) << what << " rank " << r;
          }
        }
        if (moves) {
          EXPECT_EQ(fused_ops, fusion == Fusion::kAlways ? 1 : 0) << what << " rank " << r;
        }
        bool ready_seen = false;
        for (size_t i = 0; i < p.ops.size(); ++i) {
          const OpBody& body = p.ops[i].body;
          ready_seen =
              ready_seen || std::holds_alternative<PeerSync>(body) || std::holds_alternative<FusedPeerStep>(body);
          if (i == 0 && staged) {
            EXPECT_FALSE(ready_seen) << what << ": ready posted before the staging copy";
          }
          std::vector<BufferRef> refs;
          if (const auto* c = std::get_if<Copies>(&body))
            for (const CopyRegion& x : c->regions) refs.insert(refs.end(), {x.src, x.dst});
          std::vector<const std::vector<ReduceRegion>*> reductions;
          if (const auto* f = std::get_if<FusedPeerStep>(&body)) {
            for (const CopyRegion& x : f->regions) refs.insert(refs.end(), {x.src, x.dst});
            reductions.push_back(&f->reduce);
          }
          if (const auto* red = std::get_if<Reductions>(&body)) reductions.push_back(&red->regions);
          for (const std::vector<ReduceRegion>* list : reductions)
            for (const ReduceRegion& x : *list) {
              refs.push_back(x.dst);
              refs.insert(refs.end(), x.srcs.begin(), x.srcs.end());
            }
          for (const BufferRef& ref : refs) {
            if (ref.peer >= 0) {
              EXPECT_EQ(ref.buffer, Buffer::kWork) << what << " rank " << r << " op " << i;
            }
          }
        }
      }
    }
  }
}

TEST(Lowering, SeedP2PIsZeroCopy) {
  Plan plan =
      testing::p2p_over_nccl(Layout(Mesh({2, 2}), parse_placements("S0,S1"), Dims{8192, 8192}), "S1,S0", DType::kBF16);
  RankProgram p1 = lower(plan, 1);
  ASSERT_EQ(p1.step_count, 1);
  EXPECT_TRUE(bodies<Copies>(p1, 0).empty());  // nothing packed or unpacked (and no local copy: rank 1 keeps nothing)
  const auto exchanges = bodies<Exchange>(p1, 0);
  ASSERT_EQ(exchanges.size(), 1u);  // contiguous: not pipelined
  const Exchange& x = *exchanges[0];
  ASSERT_EQ(x.sends.size(), 1u);
  EXPECT_EQ(x.sends[0].peer, 2);
  EXPECT_EQ(x.sends[0].buffer.buffer, Buffer::kInput);
  EXPECT_EQ(x.recvs[0].buffer.buffer, Buffer::kOutput);
  EXPECT_EQ(p1.work_elements, 0);
}

TEST(Lowering, LargeNonContiguousTransfersArePipelinedInMatchingChunks) {
  Layout src(Mesh({2}), parse_placements("S0"), Dims{4096, 4096});
  PlanOptions o;
  o.strategy = Strategy::kP2P;
  o.pipeline_chunk_bytes = 4 << 20;  // each rank sends 16 MiB of columns: 4 chunks
  o.transport = Transport::kNccl;
  Plan plan = make_plan(src, src.with_placements(parse_placements("S1")), DType::kF32, o);
  for (StageSchedule schedule : {StageSchedule::kLanes, StageSchedule::kSerial}) {
    RankProgram p0 = lower(plan, 0, {schedule}), p1 = lower(plan, 1, {schedule});
    const auto x0 = bodies<Exchange>(p0, 0), x1 = bodies<Exchange>(p1, 0);
    ASSERT_EQ(x0.size(), 4u);
    ASSERT_EQ(x1.size(), 4u);
    for (int s = 0; s < 4; ++s) {
      EXPECT_EQ(x0[s]->sends[0].elements, x1[s]->recvs[0].elements);
      // Rank 1 receives whole rows of its own block: in place, nothing to unpack.
      EXPECT_EQ(x1[s]->recvs[0].buffer.buffer, Buffer::kOutput);
    }
    // Rank 0 sends columns: packed chunk by chunk, one pack launch per stage; its 16 MiB local block is copied on
    // the local-copy lane, overlapping the stages.
    const Lane pack_lane = schedule == StageSchedule::kLanes ? Lane::kPack : Lane::kMain;
    int packs = 0, locals = 0;
    for (const Op& op : p0.ops) {
      if (!std::holds_alternative<Copies>(op.body)) continue;
      packs += op.lane == pack_lane;
      locals += op.lane == Lane::kLocalCopy;
    }
    EXPECT_EQ(packs, 4);
    EXPECT_EQ(locals, 1);
  }
}

// Low-SM plans (run beside compute) issue copy-engine copies in pieces of at most 16 MiB (op_schedule.hpp): local
// copies, and one-sided peer copies pulled or pushed. Elsewhere a strided local copy (the kept block here) runs on the
// copy kernel (step_geometry.hpp's local_copy_engine_for); beside compute the engines copy it, in pieces, and the
// pieces cover exactly what the whole plan's engine copies and its kept block did.
TEST(Lowering, LowSmPlansIssueCopyEngineCopiesInPieces) {
  Layout src(Mesh({2}), parse_placements("S0"), Dims{4096, 8192});  // f32: each rank's kept block 2048x4096, 32 MiB
  const Layout dst = src.with_placements(parse_placements("S1"));
  const Index kept = Index{2048} * 4096;
  for (Transport t : {Transport::kNccl, Transport::kNvlink}) {
    PlanOptions o;
    o.strategy = Strategy::kP2P;
    o.transport = t;
    o.fusion = Fusion::kNever;
    const Plan whole = make_plan(src, dst, DType::kF32, o);
    o.low_sm = true;
    const Plan pieces = make_plan(src, dst, DType::kF32, o);
    ASSERT_TRUE(pieces.low_sm());
    for (OneSidedCopies copies : {OneSidedCopies::kPull, OneSidedCopies::kPush})
      for (int rank = 0; rank < 2; ++rank) {
        LowerOptions lo;
        lo.one_sided = copies;
        Index whole_elements = 0, piece_elements = 0, largest_whole = 0, largest_piece = 0, kept_on_kernel = 0;
        for (const auto& [plan, elements, largest] :
             {std::tuple{&whole, &whole_elements, &largest_whole}, {&pieces, &piece_elements, &largest_piece}})
          for (const Op& op : lower(*plan, rank, lo).ops) {
            const auto* c = std::get_if<Copies>(&op.body);
            if (!c) continue;
            for (const CopyRegion& r : c->regions) {
              const bool local = r.src.buffer == Buffer::kInput && r.dst.buffer == Buffer::kOutput;
              if (c->engine == CopyEngine::kKernel && local && plan == &whole) kept_on_kernel += r.shape.product();
              if (c->engine != CopyEngine::kCopyEngine) continue;
              *elements += r.shape.product();
              *largest = std::max(*largest, r.shape.product() * 4);
            }
          }
        const std::string where = std::string(to_string(t)) + " rank " + std::to_string(rank);
        EXPECT_EQ(kept_on_kernel, kept) << where;
        EXPECT_EQ(largest_whole, t == Transport::kNvlink ? Index{32} << 20 : 0) << where;  // the peer copy
        EXPECT_EQ(largest_piece, Index{16} << 20) << where;
        EXPECT_EQ(piece_elements, whole_elements + kept) << where;
      }
  }
}

// Peer copies run one after another on a stream: staggered, the k-th peer copy of every rank goes to a different rank
// (pushing r -> r+k, pulling r <- r-k), so no rank's link is shared by the others' copies while one of its own waits.
// Per rank, the other end of each copy-engine peer copy it issues (pushing: the target; pulling: the source), in
// issue order.
std::vector<std::vector<int>> engine_copy_ends(const Plan& plan, OneSidedCopies copies) {
  const bool push = copies == OneSidedCopies::kPush;
  const int n = static_cast<int>(plan.src().mesh().size());
  std::vector<std::vector<int>> ends(n);
  for (int rank = 0; rank < n; ++rank) {
    LowerOptions lo;
    lo.one_sided = copies;
    for (const Op& op : lower(plan, rank, lo).ops)
      if (const auto* c = std::get_if<Copies>(&op.body); c && c->engine == CopyEngine::kCopyEngine)
        for (const CopyRegion& r : c->regions)
          if (const int end = push ? r.dst.peer : r.src.peer; end >= 0) ends[rank].push_back(end);
  }
  return ends;
}

TEST(Lowering, PeerCopiesAreStaggeredSoNoTwoRanksTargetTheSameRankAtOnce) {
  for (const auto& [mesh, from, to] : {std::tuple{std::vector<int>{4}, "S0", "R"},
                                       {std::vector<int>{4}, "S0", "S1"},
                                       {std::vector<int>{8}, "S1", "S0"},
                                       {std::vector<int>{8}, "S0", "R"},
                                       {std::vector<int>{2, 4}, "S0,S0", "R,R"}}) {
    const Layout src(Mesh(mesh), parse_placements(from), Dims{1024, 4096});  // rows of 2 KiB or more: copy engines
    const Layout dst = src.with_placements(parse_placements(to));
    const Plan plan = testing::p2p_over_nvlink(src, dst, DType::kF32, Fusion::kNever);
    const int n = static_cast<int>(src.mesh().size());
    for (OneSidedCopies copies : {OneSidedCopies::kPull, OneSidedCopies::kPush}) {
      const bool push = copies == OneSidedCopies::kPush;
      std::vector<std::vector<int>> peers = engine_copy_ends(plan, copies);
      for (std::vector<int>& p : peers) p.erase(std::unique(p.begin(), p.end()), p.end());  // a peer's pieces: once
      const std::string what = src.str() + " -> [" + to + "] " + (push ? "push" : "pull");
      for (int rank = 0; rank < n; ++rank) {
        ASSERT_EQ(static_cast<int>(peers[rank].size()), n - 1) << what << " rank " << rank;
        for (int k = 0; k < n - 1; ++k)
          EXPECT_EQ(peers[rank][k], push ? (rank + k + 1) % n : (rank - k - 1 + n) % n) << what << " rank " << rank;
      }
    }
  }
}

// Where only some pairs talk, distance order alone would start two copies into one rank: in 2x2 [S0,S0] -> [S1,S0]
// ranks 0 and 1 both write rank 2 first. The issue order keeps the k-th copies of all ranks on distinct other ends.
TEST(Lowering, PeerCopiesOfPartialPatternsNeverShareAnEndAtTheSamePosition) {
  for (const auto& [mesh, from, to] : {std::tuple{std::vector<int>{2, 2}, "S0,S0", "S1,S0"},
                                       {std::vector<int>{2, 2}, "S1,S1", "S0,S1"},
                                       {std::vector<int>{2, 2}, "S0,S1", "S1,R"},
                                       {std::vector<int>{2, 4}, "S0,S1", "S1,S0"},
                                       {std::vector<int>{4, 2}, "S0,S0", "S1,S0"}}) {
    const Layout src(Mesh(mesh), parse_placements(from), Dims{1024, 4096});
    const Layout dst = src.with_placements(parse_placements(to));
    const Plan plan = testing::p2p_over_nvlink(src, dst, DType::kF32, Fusion::kNever);
    const int n = static_cast<int>(src.mesh().size());
    for (OneSidedCopies copies : {OneSidedCopies::kPull, OneSidedCopies::kPush}) {
      const bool push = copies == OneSidedCopies::kPush;
      const std::vector<std::vector<int>> ends = engine_copy_ends(plan, copies);
      std::multiset<std::pair<int, int>> issued, planned;
      for (int rank = 0; rank < n; ++rank)
        for (int end : ends[rank]) issued.emplace(push ? rank : end, push ? end : rank);
      for (const Step& step : plan.steps())
        for (const Transfer& t : step.transfers)
          if (!t.is_local()) planned.emplace(t.src, t.dst);
      const std::string what = src.str() + " -> [" + to + "] " + (push ? "push" : "pull");
      EXPECT_EQ(issued, planned) << what << ": every planned peer transfer is issued once, by its issuer";
      for (size_t k = 0;; ++k) {
        std::vector<int> at_k;
        for (int rank = 0; rank < n; ++rank)
          if (k < ends[rank].size()) at_k.push_back(ends[rank][k]);
        if (at_k.empty()) break;
        std::sort(at_k.begin(), at_k.end());
        EXPECT_EQ(std::adjacent_find(at_k.begin(), at_k.end()), at_k.end())
            << what << ": two ranks' copy " << k << " have the same other end";
      }
    }
  }
}

// A plan scoped to one rank holds only that rank's transfers, so its issue order is computed from those: the rank
// still issues every copy of its own, each once, with the same regions as from the whole plan.
TEST(Lowering, ARankScopedPlanIssuesTheSamePeerCopies) {
  const Layout src(Mesh({2, 2}), parse_placements("S0,S0"), Dims{1024, 4096});
  const Layout dst = src.with_placements(parse_placements("S1,S0"));
  PlanOptions po;
  po.strategy = Strategy::kP2P;
  po.transport = Transport::kNvlink;
  po.fusion = Fusion::kNever;
  const Plan whole = make_plan(src, dst, DType::kF32, po);
  for (OneSidedCopies copies : {OneSidedCopies::kPull, OneSidedCopies::kPush}) {
    LowerOptions lo;
    lo.one_sided = copies;
    for (int rank = 0; rank < 4; ++rank) {
      const auto regions = [&](const Plan& plan) {
        std::multiset<std::tuple<int, int, std::vector<Index>>> out;  // (src peer, dst peer, shape) of each copy
        for (const Op& op : lower(plan, rank, lo).ops)
          if (const auto* c = std::get_if<Copies>(&op.body); c && c->engine == CopyEngine::kCopyEngine)
            for (const CopyRegion& r : c->regions)
              out.emplace(r.src.peer, r.dst.peer, std::vector<Index>(r.shape.begin(), r.shape.end()));
        return out;
      };
      EXPECT_EQ(regions(make_rank_plan(src, dst, DType::kF32, rank, po)), regions(whole)) << "rank " << rank;
    }
  }
}

// The plan facts the executor reads from the program instead of the plan: identity, whether one-sided steps address
// the peers' tensors (not when the first step is staged), the step signature every rank must share, step names.
TEST(Lowering, RecordsThePlanFactsTheExecutorReads) {
  const Layout s0(Mesh({2}), parse_placements("S0"), Dims{64, 64});
  const Layout s1 = s0.with_placements(parse_placements("S1"));
  EXPECT_TRUE(lower(make_plan(s0, s0, DType::kF32), 0).identity);
  PlanOptions nvlink;
  nvlink.strategy = Strategy::kP2P;
  nvlink.transport = Transport::kNvlink;
  nvlink.fusion = Fusion::kNever;
  const Plan pulled = make_plan(s0, s1, DType::kF32, nvlink);
  const RankProgram p0 = lower(pulled, 0), p1 = lower(pulled, 1);
  EXPECT_FALSE(p0.identity);
  EXPECT_TRUE(p0.maps_peer_tensors);
  EXPECT_EQ(p0.step_signature, p1.step_signature);
  EXPECT_NE(p0.step_signature, lower(pulled, 0, LowerOptions{.one_sided = OneSidedCopies::kPush}).step_signature);
  EXPECT_EQ(p0.step_names, std::vector<std::string>{"reshard step 0 p2p/nvlink"});
  PlanOptions nccl = nvlink;
  nccl.transport = Transport::kNccl;
  const RankProgram on_nccl = lower(make_plan(s0, s1, DType::kF32, nccl), 0);
  EXPECT_FALSE(on_nccl.maps_peer_tensors);
  EXPECT_NE(on_nccl.step_signature, p0.step_signature);
  PlanOptions changing = nvlink;
  changing.buffers_change = true;
  const Plan staged = make_plan(s0, s1, DType::kF32, changing);
  ASSERT_TRUE(staged.steps().at(0).staged) << "a 16 KiB tensor stages rather than map (map_us 100 built in)";
  EXPECT_FALSE(lower(staged, 0).maps_peer_tensors);
  const PlanBatch batch({std::make_shared<const Plan>(pulled), std::make_shared<const Plan>(pulled)});
  EXPECT_EQ(lower(batch, 0).step_names, std::vector<std::string>{"reshard step 0 batch"});
}

}  // namespace
}  // namespace reshard
