// Lowering: every rank's program stays inside its buffers, moves exactly its transfers, and needs no more
// workspace than the plan priced (the largest rank needs exactly that).
#include <gtest/gtest.h>

#include "reshard/planner.hpp"
#include "reshard/program.hpp"
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

void check_program(const Plan& plan, const RankProgram& p, const std::string& where) {
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const ProgramStep& s = p.steps[i];
    std::vector<const std::vector<CopyRegion>*> copies{&s.local};
    Index sent = 0, received = 0;
    for (const Stage& st : s.stages) {
      copies.push_back(&st.pack);
      copies.push_back(&st.unpack);
      for (const auto* list : {&st.sends, &st.recvs})
        for (const PeerTransfer& t : *list)
          ASSERT_LE(t.buffer.offset + t.elements, buffer_size(p, t.buffer.buffer)) << where;
      for (const PeerTransfer& t : st.sends) sent += t.elements;
      for (const PeerTransfer& t : st.recvs) received += t.elements;
    }
    for (const auto* list : copies) {
      for (const CopyRegion& r : *list) {
        ASSERT_EQ(r.src_strides[r.shape.size() - 1], 1) << where;
        ASSERT_EQ(r.dst_strides[r.shape.size() - 1], 1) << where;
        ASSERT_LE(extent(r, true), buffer_size(p, r.src.buffer)) << where << " step " << i;
        ASSERT_LE(extent(r, false), buffer_size(p, r.dst.buffer)) << where << " step " << i;
      }
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
          for (Strategy s : {Strategy::kCollective, Strategy::kP2P, Strategy::kHybrid}) {
            PlanOptions o;
            o.strategy = s;
            o.pipeline_chunk_bytes = (a + b) % 2 ? 16 << 20 : 8;  // tiny chunks: pipelined steps too
            o.topology.ranks_per_node = 2;
            std::optional<Plan> plan;
            try {
              plan.emplace(make_plan(src, dst, DType::kBF16, o));
            } catch (const Error&) {
              ASSERT_EQ(s, Strategy::kHybrid) << src.str();  // only hybrid may be unavailable
              continue;
            }
            Index peak = 0;
            for (int r = 0; r < mesh.size(); ++r) {
              RankProgram p = lower(*plan, r);
              std::string where = cat(src.str(), " -> [", to_string(pb), "] ", to_string(s), " rank ", r);
              EXPECT_EQ(p.input_elements, src.local_volume(r)) << where;
              EXPECT_EQ(p.output_elements, dst.local_volume(r)) << where;
              check_program(*plan, p, where);
              peak = std::max(peak, p.work_elements * 2);
            }
            EXPECT_EQ(peak, plan->peak_workspace_bytes())
                << src.str() << " -> " << to_string(pb) << " " << to_string(s);
          }
        }
      }
    }
  }
}

TEST(Lowering, SeedP2PIsZeroCopy) {
  Layout src(Mesh({2, 2}), parse_placements("S0,S1"), Dims{8192, 8192});
  PlanOptions o;
  o.strategy = Strategy::kP2P;
  Plan plan = make_plan(src, src.with_placements(parse_placements("S1,S0")), DType::kBF16, o);
  RankProgram p1 = lower(plan, 1);
  ASSERT_EQ(p1.steps.size(), 1u);
  ASSERT_EQ(p1.steps[0].stages.size(), 1u);  // contiguous: not pipelined
  const Stage& st = p1.steps[0].stages[0];
  EXPECT_TRUE(st.pack.empty());
  EXPECT_TRUE(st.unpack.empty());
  ASSERT_EQ(st.sends.size(), 1u);
  EXPECT_EQ(st.sends[0].peer, 2);
  EXPECT_EQ(st.sends[0].buffer.buffer, Buffer::kInput);
  EXPECT_EQ(st.recvs[0].buffer.buffer, Buffer::kOutput);
  EXPECT_EQ(p1.work_elements, 0);
}

TEST(Lowering, LargeNonContiguousTransfersArePipelinedInMatchingChunks) {
  Layout src(Mesh({2}), parse_placements("S0"), Dims{4096, 4096});
  PlanOptions o;
  o.strategy = Strategy::kP2P;
  o.pipeline_chunk_bytes = 4 << 20;  // each rank sends 16 MiB of columns: 4 chunks
  Plan plan = make_plan(src, src.with_placements(parse_placements("S1")), DType::kF32, o);
  RankProgram p0 = lower(plan, 0), p1 = lower(plan, 1);
  ASSERT_EQ(p0.steps[0].stages.size(), 4u);
  ASSERT_EQ(p1.steps[0].stages.size(), 4u);
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(p0.steps[0].stages[s].sends[0].elements, p1.steps[0].stages[s].recvs[0].elements);
    EXPECT_EQ(p0.steps[0].stages[s].pack.size(), 1u);  // rank 0 sends columns: packed chunk by chunk
    // Rank 1 receives whole rows of its own block: in place, nothing to unpack.
    EXPECT_TRUE(p1.steps[0].stages[s].unpack.empty());
    EXPECT_EQ(p1.steps[0].stages[s].recvs[0].buffer.buffer, Buffer::kOutput);
  }
}

}  // namespace
}  // namespace reshard
