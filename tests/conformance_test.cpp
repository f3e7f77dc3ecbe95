// Every case of PyTorch 2.11's own _compute_local_shape_and_global_offset (tests/data) must match.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "reshard/layout.hpp"

namespace reshard {
namespace {

nlohmann::json load_fixture() {
  std::ifstream in(std::string(RESHARD_TEST_DATA_DIR) + "/pytorch_layouts_dev.json");
  EXPECT_TRUE(in.good()) << "missing tests/data/pytorch_layouts_dev.json";
  return nlohmann::json::parse(in);
}

TEST(Conformance, EveryPyTorchCaseMatches) {
  nlohmann::json fixture = load_fixture();
  const auto& cases = fixture.at("cases");
  ASSERT_EQ(cases.size(), 400u);
  int checked_ranks = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    std::vector<Placement> placements;
    for (const auto& p : c.at("placements")) placements.push_back(parse_placement(p.get<std::string>()));
    Layout layout(Mesh(c.at("mesh").get<std::vector<int>>()), placements,
                  Dims::from(c.at("global_shape").get<std::vector<Index>>()));
    ASSERT_EQ(static_cast<int>(c.at("ranks").size()), layout.mesh().size()) << "case " << i;
    for (const auto& r : c.at("ranks")) {
      Dims coord = Dims::from(r.at("coord").get<std::vector<Index>>());
      int rank = layout.mesh().rank_at(coord);
      EXPECT_EQ(layout.mesh().coord_of(rank), coord);
      Box b = layout.box(rank);
      EXPECT_EQ(b.shape.vec(), r.at("local_shape").get<std::vector<Index>>())
          << "case " << i << " " << layout.str() << " rank " << rank;
      EXPECT_EQ(b.offset.vec(), r.at("global_offset").get<std::vector<Index>>())
          << "case " << i << " " << layout.str() << " rank " << rank;
      ++checked_ranks;
    }
  }
  EXPECT_GT(checked_ranks, 400);
}

// Independent of the fixture: the non-empty shards of a layout without Partial tile the tensor, each element
// held by exactly (mesh size / number of distinct shards) ranks, and intervals agree with boxes.
TEST(Conformance, ShardsTileTheTensor) {
  const std::vector<std::vector<int>> meshes = {{2}, {3}, {2, 2}, {2, 3}, {3, 2}, {2, 2, 2}};
  const std::vector<Dims> shapes = {{0, 3}, {1, 5}, {7, 5}, {10, 3}, {3, 11}};
  for (const auto& m : meshes) {
    Mesh mesh(m);
    int nd = 2;
    int options = nd + 1;  // R, S0, S1
    int combos = 1;
    for (size_t k = 0; k < m.size(); ++k) combos *= options;
    for (int code = 0; code < combos; ++code) {
      std::vector<Placement> ps;
      for (int k = 0, c = code; k < mesh.ndim(); ++k, c /= options)
        ps.push_back(c % options == 0 ? Placement::replicate() : Placement::shard(c % options - 1));
      for (const Dims& shape : shapes) {
        Layout layout(mesh, ps, shape);
        std::vector<int> count(static_cast<size_t>(layout.global_volume()), 0);
        int replicas = 1;
        for (int k = 0; k < mesh.ndim(); ++k)
          if (ps[k].is_replicate()) replicas *= mesh.dim_size(k);
        for (int r = 0; r < mesh.size(); ++r) {
          Box b = layout.box(r);
          for (Index i = 0; i < b.shape[0]; ++i)
            for (Index j = 0; j < b.shape[1]; ++j) ++count[(b.offset[0] + i) * shape[1] + b.offset[1] + j];
        }
        for (int c : count) ASSERT_EQ(c, replicas) << layout.str();
      }
    }
  }
}

}  // namespace
}  // namespace reshard
