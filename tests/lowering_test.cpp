// Lowering: every rank's program stays inside its buffers, moves exactly its transfers, and needs no more
// workspace than the plan priced (the largest rank needs exactly that).
#include <gtest/gtest.h>

#include "reshard/planner.hpp"
#include "reshard/program.hpp"

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
    for (const auto* list : {&s.pack, &s.local, &s.unpack}) {
      for (const CopyRegion& r : *list) {
        ASSERT_EQ(r.src_strides[r.shape.size() - 1], 1) << where;
        ASSERT_EQ(r.dst_strides[r.shape.size() - 1], 1) << where;
        ASSERT_LE(extent(r, true), buffer_size(p, r.src.buffer)) << where << " step " << i;
        ASSERT_LE(extent(r, false), buffer_size(p, r.dst.buffer)) << where << " step " << i;
      }
    }
    for (const auto* list : {&s.sends, &s.recvs})
      for (const PeerTransfer& t : *list) ASSERT_LE(t.buffer.offset + t.elements, buffer_size(p, t.buffer.buffer)) << where;
    if (plan.steps()[i].kind == StepKind::kP2P) {
      size_t sends = 0, recvs = 0;
      for (const Transfer& t : plan.steps()[i].transfers) {
        sends += !t.is_local() && t.src == p.rank;
        recvs += !t.is_local() && t.dst == p.rank;
      }
      EXPECT_EQ(s.sends.size(), sends) << where;
      EXPECT_EQ(s.recvs.size(), recvs) << where;
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
    for (int a = 0; a < combos; ++a) {
      for (int b = 0; b < combos; ++b) {
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
            EXPECT_EQ(peak, plan->peak_workspace_bytes()) << src.str() << " -> " << to_string(pb) << " " << to_string(s);
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
  EXPECT_TRUE(p1.steps[0].pack.empty());
  EXPECT_TRUE(p1.steps[0].unpack.empty());
  ASSERT_EQ(p1.steps[0].sends.size(), 1u);
  EXPECT_EQ(p1.steps[0].sends[0].peer, 2);
  EXPECT_EQ(p1.steps[0].sends[0].buffer.buffer, Buffer::kInput);
  EXPECT_EQ(p1.steps[0].recvs[0].buffer.buffer, Buffer::kOutput);
  EXPECT_EQ(p1.work_elements, 0);
}

}  // namespace
}  // namespace reshard
