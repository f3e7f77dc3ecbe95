// Redistribution between layouts on different meshes of one world of ranks, end to end on the host backend: every
// pair of placements from R / S0 / S1 / P(sum) over a set of mesh pairs (identical, overlapping and disjoint rank
// sets, permuted ranks, a mesh on a subset of the world to itself), sizes 0, 1 and uneven, p2p on both transports,
// every element of every rank checked; the minimum bytes moved; rank-scoped plans; plan JSON round trips; and bad
// inputs refused with errors that name the problem.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli_runner.hpp"
#include "expect_error.hpp"
#include "host_runs.hpp"
#include "placement_sets.hpp"
#include "reshard/harness.hpp"
#include "reshard/layout_format.hpp"
#include "reshard/plan_json.hpp"
#include "reshard/planner.hpp"
#include "test_tier.hpp"

namespace reshard {
namespace {

using testing::expect_error;

// Every assignment of R, S0, S1 and P(sum) to the dims of a mesh.
std::vector<std::vector<Placement>> placements_for(int mesh_ndim) {
  return testing::placement_lists(mesh_ndim, {Placement::replicate(), Placement::shard(0), Placement::shard(1),
                                              Placement::partial(ReduceOp::kSum)});
}

struct MeshPair {
  const char* name;
  const char* from;  // Mesh::str() forms, read by parse_mesh
  const char* to;
};

void PrintTo(const MeshPair& p, std::ostream* os) { *os << p.from << " -> " << p.to; }

// The fewest bytes any plan moves: every rank receives each contribution of its target box once, less what it holds.
Index minimum_bytes(const Layout& src, const Layout& dst, int es) {
  Index contributions = 1;
  for (int k = 0; k < src.mesh().ndim(); ++k)
    if (src.placement(k).is_partial()) contributions *= src.mesh().dim_size(k);
  Index total = 0;
  for (int r = 0; r < src.mesh().world_size(); ++r)
    total += contributions * dst.local_volume(r) - volume(intersect(src.box(r), dst.box(r)));
  return total * es;
}

class CrossMeshExhaustive : public ::testing::TestWithParam<MeshPair> {};

TEST_P(CrossMeshExhaustive, EveryPlacementPairEveryElement) {
  const Mesh from = parse_mesh(GetParam().from), to = parse_mesh(GetParam().to);
  ASSERT_EQ(from.world_size(), to.world_size());
  const int world = from.world_size();
  LocalRunner runner(Backend::kHost, world, std::chrono::seconds(30));
  const auto sources = placements_for(from.ndim()), targets = placements_for(to.ndim());
  const Dims shapes[] = {Dims{0, 3}, Dims{1, 1}, Dims{7, 5}};
  // Every placement pair on nccl and nvlink; the fast tier runs each on one of the shapes (rotating), the full tier
  // (RESHARD_TEST_TIER=full) on all three.
  const bool all_shapes = testing::full_tier();
  long long pair = 0;
  int runs = 0, nvlink_runs = 0, partial_runs = 0;
  for (const auto& sp : sources) {
    for (const auto& tp : targets) {
      ++pair;
      for (int s = 0; s < 3; ++s) {
        if (!all_shapes && s != pair % 3) continue;
        const Dims& shape = shapes[s];
        const Layout src(from, sp, shape), dst(to, tp, shape);
        // Integers keep Partial sums exact (floating partitions are checked by the f32 case below).
        const DType dtype = runs % 2 ? DType::kI32 : DType::kI64;
        PlanOptions o;
        o.topology.ranks_per_node = runs % 3 == 0 ? 2 : 8;  // nvlink only where transfers stay on a node
        o.pipeline_chunk_bytes = runs % 5 == 0 ? 8 : 0;     // every fifth case pipelined in tiny chunks
        const Plan automatic = make_plan(src, dst, dtype, o);
        for (const Candidate& c : automatic.candidates()) {
          if (c.strategy != Strategy::kP2P) {
            ASSERT_FALSE(c.available) << to_string(c.strategy) << " across meshes";
            continue;
          }
          if (!c.available) continue;
          // The fast tier runs nvlink on every other pair of the large enumerations (pairs of 2-D meshes).
          if (!all_shapes && c.transport == Transport::kNvlink && sources.size() * targets.size() > 64 && pair % 2)
            continue;
          o.strategy = Strategy::kP2P;
          o.transport = c.transport;
          const Plan plan = make_plan(src, dst, dtype, o);
          const RunResult r = runner.run(plan, testing::quick_host_run());
          const std::string what = cat(src.str(), " -> ", dst.str(), " ", to_string(dtype), " ", to_string(c.transport),
                                       ": ", r.first_error);
          ASSERT_EQ(r.wrong_elements, 0) << what;
          Index expected = 0;
          for (int rank = 0; rank < world; ++rank) expected += 3 * dst.local_volume(rank);
          ASSERT_EQ(r.checked_elements, expected) << what;
          ASSERT_EQ(plan.bytes_moved(), minimum_bytes(src, dst, element_size(dtype))) << what;
          for (const Transfer& t : plan.steps().front().transfers) {
            ASSERT_TRUE(from.contains(t.src)) << what << ": rank " << t.src << " sends but holds nothing";
            ASSERT_TRUE(to.contains(t.dst)) << what << ": rank " << t.dst << " receives but wants nothing";
          }
          ++runs;
          nvlink_runs += c.transport == Transport::kNvlink;
          partial_runs += src.has_partial() || dst.has_partial();
        }
      }
    }
  }
  EXPECT_GT(runs, 0);
  EXPECT_GT(nvlink_runs, 0);
  EXPECT_GT(partial_runs, 0);
}

INSTANTIATE_TEST_SUITE_P(
    CrossMesh, CrossMeshExhaustive,
    ::testing::Values(MeshPair{"TwoByTwoToFour", "2x2", "4"},                   // identical rank sets
                      MeshPair{"FourToTwoOverlapping", "4", "2[1,3]/4"},        // target a subset of the source
                      MeshPair{"TwoToOneOnRankOne", "2", "1[1]/2"},             // (2) -> (1) on rank 1
                      MeshPair{"TwoByFourToEight", "2x4", "8"},                 // training -> serving
                      MeshPair{"EightToTwoByTwoOnTop", "8", "2x2[4,5,6,7]/8"},  // checkpoint to fewer ranks
                      MeshPair{"DisjointStages", "2[0,1]/5", "3[2,3,4]/5"},     // pipeline hand-off, uneven
                      MeshPair{"PermutedRanks", "2x2[3,1,2,0]", "2x2"},         // same ranks, other order
                      MeshPair{"SubsetToItself", "2x2[4,5,6,7]/8", "2x2[4,5,6,7]/8"},
                      MeshPair{"PartlyOverlapping", "2x2[0,1,2,3]/6", "2x2[5,4,3,2]/6"}),
    [](const ::testing::TestParamInfo<MeshPair>& param_info) { return std::string(param_info.param.name); });

// Floating Partial targets follow PyTorch's Replicate -> Partial(sum): every rank holds value / group size. Every
// reduce op, on floating and integer types, as source and as target.
TEST(CrossMesh, EveryReduceOpAcrossMeshes) {
  const Mesh from = parse_mesh("2x2"), to = parse_mesh("2[2,3]/4");
  LocalRunner runner(Backend::kHost, 4, std::chrono::seconds(30));
  int runs = 0;
  for (const char* op : {"P(sum)", "P(avg)", "P(max)", "P(min)"}) {
    for (DType dtype : {DType::kF32, DType::kI32, DType::kBF16, DType::kI8}) {
      const std::string partial(op);
      for (const auto& [sp, tp] : std::vector<std::pair<std::string, std::string>>{
               {"S0,S1", partial}, {partial + "," + partial, "S1"}, {partial + ",S0", partial}, {"R,R", partial}}) {
        const Layout src(from, parse_placements(sp), Dims{5, 3}), dst(to, parse_placements(tp), Dims{5, 3});
        const Plan plan = make_plan(src, dst, dtype);
        EXPECT_EQ(plan.steps().back().kind, dst.has_partial() ? StepKind::kLocal : StepKind::kP2P);
        const RunResult r = runner.run(plan, testing::quick_host_run());
        EXPECT_EQ(r.wrong_elements, 0) << src.str() << " -> " << dst.str() << " " << to_string(dtype) << ": "
                                       << r.first_error;
        EXPECT_EQ(r.checked_elements, 3 * (dst.local_volume(2) + dst.local_volume(3)));
        ++runs;
      }
    }
  }
  EXPECT_EQ(runs, 64);
}

// A rank's plan holds exactly the global plan's transfers that rank sends or receives, and lowers the same.
TEST(CrossMesh, RankPlansHoldTheirShareOfTheGlobalPlan) {
  const Layout src(parse_mesh("2x4"), parse_placements("S0,P"), Dims{9, 6});
  const Layout dst(parse_mesh("2x2[4,5,6,7]/8"), parse_placements("S1,R"), Dims{9, 6});
  const Plan global = make_plan(src, dst, DType::kF32);
  for (int r = 0; r < 8; ++r) {
    const Plan mine = make_rank_plan(src, dst, DType::kF32, r);
    std::vector<Transfer> want;
    for (const Transfer& t : global.steps().front().transfers)
      if (t.src == r || t.dst == r) want.push_back(t);
    EXPECT_EQ(mine.steps().front().transfers, want) << "rank " << r;
    EXPECT_EQ(mine.estimated_us(), global.estimated_us());
    const RankProgram a = lower(global, r), b = lower(mine, r);
    EXPECT_EQ(a.ops.size(), b.ops.size());
    EXPECT_EQ(a.work_elements, b.work_elements);
  }
}

TEST(CrossMesh, PlanJsonRoundTrips) {
  const Layout src(parse_mesh("2x2[3,1,2,0]/6"), parse_placements("P,S1"), Dims{7, 5});
  const Layout dst(parse_mesh("3[5,4,0]/6"), parse_placements("P"), Dims{7, 5});
  for (std::optional<int> rank : {std::optional<int>(), std::optional<int>(4)}) {
    const Plan plan = rank ? make_rank_plan(src, dst, DType::kI32, *rank) : make_plan(src, dst, DType::kI32);
    const std::string text = plan_to_json(plan);
    const Plan back = plan_from_json(text);
    EXPECT_EQ(back.src(), src);
    EXPECT_EQ(back.dst(), dst);
    EXPECT_EQ(back.steps().front().transfers, plan.steps().front().transfers);
    EXPECT_EQ(plan_to_json(back), text);
    if (!rank) {
      LocalRunner runner(Backend::kHost, 6, std::chrono::seconds(30));
      EXPECT_EQ(runner.run(back, testing::quick_host_run()).wrong_elements, 0);
    }
  }
}

TEST(CrossMesh, CollectiveAndHybridAreUnavailableWithAReason) {
  const Layout src(parse_mesh("2x2"), parse_placements("S0,S1"), Dims{8, 8});
  const Layout dst(parse_mesh("4"), parse_placements("S1"), Dims{8, 8});
  const Plan plan = make_plan(src, dst, DType::kF32);
  EXPECT_EQ(plan.strategy(), Strategy::kP2P);
  for (const Candidate& c : plan.candidates())
    if (c.strategy != Strategy::kP2P) {
      EXPECT_EQ(c.reason, "source and target meshes differ");
    }
  PlanOptions o;
  o.strategy = Strategy::kCollective;
  try {
    make_plan(src, dst, DType::kF32, o);
    ADD_FAILURE() << "a collective plan across meshes";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("source and target meshes differ"), std::string::npos) << e.what();
  }
}

TEST(CrossMesh, MeshesOnAWorldRefuseBadRanks) {
  expect_error([] { Mesh({2}, {0, 8}, 8); }, ErrorKind::kInvalidArgument, "rank list entry 8 is outside 0..7");
  expect_error([] { Mesh({2}, {-1, 3}, 8); }, ErrorKind::kInvalidArgument, "rank list entry -1 is outside 0..7");
  expect_error([] { Mesh({2}, {3, 3}, 8); }, ErrorKind::kInvalidArgument, "rank 3 appears twice");
  expect_error([] { Mesh({4}, {0, 1, 2, 3}, 3); }, ErrorKind::kInvalidArgument, "needs a world size in 4..");
  expect_error([] { Mesh({2}, {0, 1}, kMaxRanks + 1); }, ErrorKind::kInvalidArgument, "needs a world size");
  expect_error([] { parse_mesh("2x2[0,1,2]/8"); }, ErrorKind::kInvalidArgument, "has 4 positions but the rank list");
  expect_error([] { parse_mesh("2[0,1/8"); }, ErrorKind::kParse, "must end with ']'");
  expect_error([] { parse_mesh("2[0,1]/0"); }, ErrorKind::kParse, "world size 0");
  expect_error([] { parse_mesh("2[0,1]/99999999999999999999"); }, ErrorKind::kParse, "world size");
  expect_error([] { parse_rank_list("3-1"); }, ErrorKind::kParse, "runs backwards");
  expect_error([] { parse_rank_list("0-2000000"); }, ErrorKind::kParse, "outside 0..");
  expect_error([] { parse_rank_list("0,,1"); }, ErrorKind::kParse, "rank list");
  expect_error([] { Layout(parse_mesh("1[1]/2"), parse_placements("R"), Dims{}); }, ErrorKind::kInvalidArgument,
               "0-dim tensor");
}

TEST(CrossMesh, MeshTextRoundTrips) {
  for (const char* text : {"2x4", "2x2[3,2,1,0]", "2x2[4,5,6,7]/8", "1[1]/2", "3[5,0,2]/6", "4[0,1,2,3]/5"}) {
    const Mesh m = parse_mesh(text);
    EXPECT_EQ(m.str(), text);
    EXPECT_EQ(parse_mesh(m.str()), m);
  }
  EXPECT_EQ(parse_mesh("4[0,1,2,3]").str(), "4");  // the default rank list is not printed
  EXPECT_EQ(parse_rank_list("0-3,6,7"), (std::vector<int>{0, 1, 2, 3, 6, 7}));
  const Mesh m = parse_mesh("2x2[4,5,6,7]/8");
  EXPECT_EQ(m.size(), 4);
  EXPECT_EQ(m.world_size(), 8);
  EXPECT_FALSE(m.contains(3));
  EXPECT_TRUE(m.contains(6));
  EXPECT_EQ(m.coord_of(6), (Dims{1, 0}));
  const Layout l(m, parse_placements("S0,S1"), Dims{4, 4});
  EXPECT_EQ(l.local_volume(2), 0);
  EXPECT_EQ(l.box(7), (Box{Dims{2, 2}, Dims{2, 2}}));
  expect_error([&] { l.box(8); }, ErrorKind::kInvalidArgument, "rank 8 is not in mesh 2x2[4,5,6,7]/8 (ranks 0..7)");
  // Tables and JSON list the mesh's ranks (ascending), not the world's.
  const Layout p(parse_mesh("2[6,4]/8"), parse_placements("S0"), Dims{4});
  const std::string table = layout_table(p, std::nullopt);
  EXPECT_NE(table.find("\n4     [1]"), std::string::npos) << table;
  EXPECT_NE(table.find("\n6     [0]"), std::string::npos) << table;
  EXPECT_EQ(table.find("\n0 "), std::string::npos) << table;
  const nlohmann::json j = nlohmann::json::parse(layout_json(p, 0, std::nullopt));
  EXPECT_EQ(j["world_size"], 8);
  EXPECT_EQ(j["ranks"].size(), 2u);
  EXPECT_EQ(j["ranks"][0]["rank"], 4);
  EXPECT_EQ(j["ranks"][0]["global_offset"], nlohmann::json::parse("[2]"));
}

TEST(CrossMesh, DifferentWorldsOrShapesAreRefused) {
  const Layout a(parse_mesh("2x2"), parse_placements("S0,R"), Dims{8, 8});
  const Layout b(parse_mesh("4[0,1,2,3]/5"), parse_placements("S0"), Dims{8, 8});
  const Layout c(parse_mesh("4"), parse_placements("S0"), Dims{8, 9});
  expect_error([&] { make_plan(a, b, DType::kF32); }, ErrorKind::kInvalidArgument, "worlds of different sizes");
  expect_error([&] { make_plan(a, c, DType::kF32); }, ErrorKind::kInvalidArgument,
               "source shape 8x8 and target shape 8x9 differ");
  const Layout d(parse_mesh("4"), parse_placements("R"), Dims{8, 8});
  expect_error([&] { make_rank_plan(a, d, DType::kF32, 4); }, ErrorKind::kInvalidArgument,
               "rank 4 is not in mesh 2x2 (ranks 0..3)");
}

// A plan file whose meshes are malformed is refused with an error naming the field.
TEST(CrossMesh, MalformedPlanJsonIsRefused) {
  const Layout src(parse_mesh("2x2[0,1,2,3]/6"), parse_placements("S0,R"), Dims{8, 4});
  const Layout dst(parse_mesh("2[4,5]/6"), parse_placements("S1"), Dims{8, 4});
  const nlohmann::ordered_json good = nlohmann::ordered_json::parse(plan_to_json(make_plan(src, dst, DType::kF32)));
  ASSERT_EQ(good["dst"]["world_size"], 6);
  ASSERT_EQ(good["dst"]["mesh_ranks"], nlohmann::ordered_json::parse("[4,5]"));
  auto refused = [&](const std::function<void(nlohmann::ordered_json&)>& mutate, const std::string& needle) {
    nlohmann::ordered_json j = good;
    mutate(j);
    expect_error([&] { plan_from_json(j.dump()); }, ErrorKind::kInvalidArgument, needle);
  };
  refused([](auto& j) { j["dst"]["world_size"] = 0; }, "plan field 'dst.world_size' must be in 1..");
  refused([](auto& j) { j["dst"]["world_size"] = 1LL << 40; }, "plan field 'dst.world_size' must be in 1..");
  refused([](auto& j) { j["dst"]["world_size"] = "six"; }, "plan field 'dst.world_size' must be an integer");
  refused([](auto& j) { j["dst"]["world_size"] = 5.5; }, "plan field 'dst.world_size' must be an integer");
  refused([](auto& j) { j["dst"]["mesh_ranks"] = {4, 6}; }, "plan field 'dst': rank list entry 6 is outside 0..5");
  refused([](auto& j) { j["dst"]["mesh_ranks"] = {5, 5}; }, "plan field 'dst': rank 5 appears twice");
  refused([](auto& j) { j["dst"]["mesh_ranks"] = {4, 5, 0}; }, "plan field 'dst': mesh 2 has 2 positions");
  refused([](auto& j) { j["dst"]["world_size"] = 1; }, "plan field 'dst': mesh 2 of 2 ranks needs a world size");
  refused([](auto& j) { j["dst"]["world_size"] = 8; }, "are in worlds of different sizes (6 and 8 ranks)");
  refused([](auto& j) { j["dst"]["mesh_ranks"] = {3, 2}; }, "is not in rank 4's target [8:8, 4:4] (empty)");
  // Rank 1 holds what rank 0 sends rank 4 (the source is replicated on mesh dim 1), but the rule picks rank 0.
  ASSERT_EQ(good["steps"][0]["transfers"][0]["src"], 0);
  ASSERT_EQ(good["steps"][0]["transfers"][0]["dst"], 4);
  refused([](auto& j) { j["steps"][0]["transfers"][0]["src"] = 1; }, "is not one the planner assigns");
  refused([](auto& j) { j["steps"][0]["transfers"][0]["dst"] = 6; }, "outside the mesh's world (ranks 0..5)");
}

TEST(CrossMesh, CliPlansAndRunsBetweenMeshes) {
  const testing::CliResult plan = testing::run_cli(
      "plan --from-mesh 2x4 --from-ranks 0-7 --to-mesh 8 --to-ranks 0-7 --from S0,S1 --to S0 --shape 16x16");
  EXPECT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_NE(plan.out.find("plan   2x4 [S0,S1] -> 8 [S0]"), std::string::npos) << plan.out;
  EXPECT_NE(plan.out.find("collective      unavailable: source and target meshes differ"), std::string::npos);
  const testing::CliResult run = testing::run_cli(
      "run --backend host --iters 1 --warmup 0 --from-mesh 2 --from-ranks 0,1 --to-mesh 1 --to-ranks 1 --from S0 "
      "--to R --shape 7x3 --dtype i32");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("2->1[1]/2"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("elements on 2 ranks: all correct"), std::string::npos) << run.out;
}

TEST(CrossMesh, CliRefusesBadMeshesWithExitCode2) {
  const char* base = " --from S0 --to R --shape 6x3";
  for (const auto& [args, needle] : std::vector<std::pair<std::string, std::string>>{
           {"plan --from-mesh 2 --from-ranks 0,5 --to-mesh 2 --world-size 4", "--from-ranks: rank list entry 5"},
           {"plan --from-mesh 2 --from-ranks 1,1 --to-mesh 2", "--from-ranks: rank 1 appears twice"},
           {"plan --from-mesh 2 --from-ranks 0- --to-mesh 2", "--from-ranks: rank list '0-'"},
           {"plan --from-mesh 2 --to-mesh 2 --to-ranks 3-1", "--to-ranks: rank list '3-1': range 3-1 runs backwards"},
           {"plan --from-mesh 2 --to-mesh 3 --to-ranks 0,1", "--to-ranks: mesh 3 has 3 positions"},
           {"plan --from-mesh 2 --to-mesh 2 --world-size 0", "--world-size must be in 1.."},
           {"plan --from-mesh 4 --to-mesh 2 --world-size 3", "--from-ranks: mesh 4 of 4 ranks needs a world size"},
           {"plan --from-mesh 2", "--to-mesh (or --mesh) is required"},
       }) {
    const testing::CliResult r = testing::run_cli(args + base);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << args << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace
}  // namespace reshard
