// Every case of PyTorch 2.11's own _compute_local_shape_and_global_offset (tests/data) must match, _StridedShard
// layouts included (tests/data/pytorch_strided_layouts.json, written by tests/data/make_strided_fixture.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iostream>
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

// ---- _StridedShard -----------------------------------------------------------------------------------------------

// PyTorch's algorithm taken literally, on explicit index lists: Shard.local_shard_size_and_offset for Shard;
// _StridedShard._split_tensor (torch.chunk into split_factor pieces, each piece into n chunks, empty chunks filled
// in, chunk i of every piece concatenated) for _StridedShard; the list of a tensor dim maps local positions to
// global indices (_compute_local_shape_and_global_offset's shard_dim_to_global_offsets).
std::vector<std::vector<Index>> torch_chunk(const std::vector<Index>& xs, Index n) {
  std::vector<std::vector<Index>> out;
  const Index s = static_cast<Index>(xs.size());
  const Index full = (s + n - 1) / n;
  for (Index start = 0; full > 0 && start < s; start += full)
    out.emplace_back(xs.begin() + start, xs.begin() + std::min(s, start + full));
  while (static_cast<Index>(out.size()) < n) out.emplace_back();  // fill_empty_tensor_to_shards
  return out;
}

LocalShard reference_local_shard(const Mesh& mesh, const std::vector<Placement>& ps, const Dims& shape,
                                 const Dims& coord) {
  LocalShard r{shape, Dims(shape.size(), 0)};
  for (int d = 0; d < shape.size(); ++d) {
    std::vector<Index> list(static_cast<size_t>(shape[d]));
    for (Index i = 0; i < shape[d]; ++i) list[i] = i;
    bool sharded = false;
    for (int k = 0; k < mesh.ndim(); ++k) {
      const Placement p = normalize(ps[k], shape.size());
      if (!p.is_shard(d)) continue;
      sharded = true;
      const Index n = mesh.dim_size(k);
      std::vector<Index> mine;
      if (!p.is_strided()) {
        mine = torch_chunk(list, n)[coord[k]];
      } else {
        for (const std::vector<Index>& piece : torch_chunk(list, p.split_factor())) {
          const std::vector<Index> part = torch_chunk(piece, n)[coord[k]];
          mine.insert(mine.end(), part.begin(), part.end());
        }
      }
      list = mine;
    }
    r.shape[d] = static_cast<Index>(list.size());
    r.offset[d] = list.empty() ? (sharded ? shape[d] : 0) : list.front();
  }
  return r;
}

// Hand-derived from PyTorch's source (the tables in _StridedShard's docstring and the example in
// _compute_local_shape_and_global_offset), independent of any implementation.
TEST(ConformanceStrided, HandDerivedFromPyTorchDocs) {
  struct Rank {
    Dims coord, shape, offset;
  };
  struct Case {
    std::vector<int> mesh;
    const char* placements;
    Dims shape;
    bool one_box;
    std::vector<Rank> ranks;
  };
  const Case cases[] = {
      // _StridedShard docstring: [8, 8] on mesh (dp=2, tp=2), right-to-left: rank (0,1) holds rows 4-5.
      {{2, 2},
       "_StridedShard(0, split_factor=2), Shard(0)",
       {8, 8},
       true,
       {{{0, 0}, {2, 8}, {0, 0}}, {{0, 1}, {2, 8}, {4, 0}}, {{1, 0}, {2, 8}, {2, 0}}, {{1, 1}, {2, 8}, {6, 0}}}},
      // _compute_local_shape_and_global_offset comment: [0..7], S(0), SS(0, split_factor=2) on (2, 2): rank (0, 1)
      // holds {1, 3}; PyTorch reports local shape 2 and offset 1 (not one box).
      {{2, 2},
       "S0,SS0/2",
       {8},
       false,
       {{{0, 0}, {2}, {0}}, {{0, 1}, {2}, {1}}, {{1, 0}, {2}, {4}}, {{1, 1}, {2}, {5}}}},
      // Uneven, derived by hand: 7 rows, pieces [0,4) [4,7); dp chunk 0 of each: {0,1,4,5}, dp chunk 1: {2,3,6}.
      {{2, 2},
       "SS0/2,S0",
       {7, 3},
       true,
       {{{0, 0}, {2, 3}, {0, 0}}, {{0, 1}, {2, 3}, {4, 0}}, {{1, 0}, {2, 3}, {2, 0}}, {{1, 1}, {1, 3}, {6, 0}}}},
      // A split factor that is not the TP size: 12 rows, pieces of 4; dp chunk 0 = {0,1,4,5,8,9}; tp halves
      // {0,1,4} and {5,8,9}: several ranges.
      {{2, 2},
       "SS0/3,S0",
       {12},
       false,
       {{{0, 0}, {3}, {0}}, {{0, 1}, {3}, {5}}, {{1, 0}, {3}, {2}}, {{1, 1}, {3}, {7}}}},
      // 1-D: rank 0 holds {0,1,4,5}, rank 1 {2,3,6,7}.
      {{2}, "SS0/2", {8}, false, {{{0}, {4}, {0}}, {{1}, {4}, {2}}}},
      // HSDP + TP on (2, 2, 2): replicate, strided dp, tp.
      {{2, 2, 2},
       "R,SS0/2,S0",
       {8, 3},
       true,
       {{{0, 0, 0}, {2, 3}, {0, 0}},
        {{0, 0, 1}, {2, 3}, {4, 0}},
        {{0, 1, 0}, {2, 3}, {2, 0}},
        {{0, 1, 1}, {2, 3}, {6, 0}},
        {{1, 0, 0}, {2, 3}, {0, 0}},
        {{1, 0, 1}, {2, 3}, {4, 0}},
        {{1, 1, 0}, {2, 3}, {2, 0}},
        {{1, 1, 1}, {2, 3}, {6, 0}}}},
      // Empty chunks: 3 rows on (2, 2): pieces [0,2) [2,3); rank (1, *) gets {1} from piece 0 and nothing from
      // piece 1; its tp chunk 1 is empty (offset = the extent).
      {{2, 2}, "SS0/2,S0", {3}, true, {{{0, 0}, {1}, {0}}, {{0, 1}, {1}, {2}}, {{1, 0}, {1}, {1}}, {{1, 1}, {0}, {3}}}},
  };
  for (const Case& c : cases) {
    Layout layout(Mesh(c.mesh), parse_placements(c.placements), c.shape);
    EXPECT_EQ(layout.one_box_per_rank(), c.one_box) << layout.str();
    for (const Rank& r : c.ranks) {
      const int rank = layout.mesh().rank_at(r.coord);
      const LocalShard got = layout.local_shard(rank);
      EXPECT_EQ(got.shape, r.shape) << layout.str() << " coord " << to_string(r.coord, ',');
      EXPECT_EQ(got.offset, r.offset) << layout.str() << " coord " << to_string(r.coord, ',');
      if (c.one_box) {
        EXPECT_EQ(layout.box(rank), (Box{r.offset, r.shape})) << layout.str();
      } else {
        EXPECT_THROW(layout.box(rank), Error);
      }
    }
  }
}

// Every layout of a family (meshes up to 3-D, extents 0..13, split factors 1..4 with Shard/Replicate) against the
// literal reference above, range by range; and one-box layouts tile the tensor.
TEST(ConformanceStrided, MatchesPyTorchsAlgorithmOnEveryLayoutOfAFamily) {
  const std::vector<std::vector<int>> meshes = {{2}, {3}, {2, 2}, {2, 3}, {3, 2}, {4, 2}, {2, 2, 2}};
  const std::vector<Placement> options = {Placement::replicate(),
                                          Placement::shard(0),
                                          Placement::shard(1),
                                          Placement::strided_shard(0, 2),
                                          Placement::strided_shard(0, 3),
                                          Placement::strided_shard(0, 4),
                                          Placement::strided_shard(1, 2)};
  int layouts = 0, boxed = 0;
  for (const auto& m : meshes) {
    const Mesh mesh(m);
    int combos = 1;
    for (size_t k = 0; k < m.size(); ++k) combos *= static_cast<int>(options.size());
    for (int code = 0; code < combos; ++code) {
      std::vector<Placement> ps;
      for (int k = 0, c = code; k < mesh.ndim(); ++k, c /= static_cast<int>(options.size()))
        ps.push_back(options[c % options.size()]);
      if (std::none_of(ps.begin(), ps.end(), [](const Placement& p) { return p.is_strided(); })) continue;
      for (const Dims& shape : {Dims{0, 2}, Dims{1, 3}, Dims{5, 2}, Dims{8, 3}, Dims{13, 4}, Dims{4, 12}}) {
        const Layout layout(mesh, ps, shape);
        ++layouts;
        bool all_one_box = true;
        std::vector<int> count(static_cast<size_t>(layout.global_volume()), 0);
        for (int r = 0; r < mesh.size(); ++r) {
          const Dims coord = mesh.coord_of(r);
          const LocalShard want = reference_local_shard(mesh, ps, shape, coord);
          const LocalShard got = layout.local_shard(r);
          ASSERT_EQ(got.shape, want.shape) << layout.str() << " rank " << r;
          ASSERT_EQ(got.offset, want.offset) << layout.str() << " rank " << r;
          for (int d = 0; d < shape.size(); ++d) all_one_box = all_one_box && layout.ranges(d, coord).size() <= 1;
          if (!layout.one_box_per_rank()) continue;
          const Box b = layout.box(r);
          for (Index i = 0; i < b.shape[0]; ++i)
            for (Index j = 0; j < b.shape[1]; ++j) ++count[(b.offset[0] + i) * shape[1] + b.offset[1] + j];
        }
        ASSERT_EQ(layout.one_box_per_rank(), all_one_box) << layout.str();
        if (!layout.one_box_per_rank()) continue;
        ++boxed;
        int replicas = 1;
        for (int k = 0; k < mesh.ndim(); ++k)
          if (ps[k].is_replicate()) replicas *= mesh.dim_size(k);
        for (int c : count) ASSERT_EQ(c, replicas) << layout.str();
      }
    }
  }
  EXPECT_GT(layouts, 2000);
  EXPECT_GT(boxed, 100);
}

// Hostile split factors fail fast with a clear error instead of enumerating billions of pieces or ranges.
TEST(ConformanceStrided, HostileSplitFactorsFailFast) {
  try {
    Layout(Mesh({2}), {Placement::strided_shard(0, 2147483647)}, Dims{Index(1) << 40});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("pieces"), std::string::npos) << e.what();
  }
  // Many pieces that each leave this rank one separate range: the range bound trips.
  EXPECT_THROW(Layout(Mesh({2}), {Placement::strided_shard(0, 1 << 19)}, Dims{Index(1) << 24}), Error);
  // A huge split factor on a small extent has few non-empty pieces: three pieces of one index, each of whose two
  // chunks is the index and nothing, so rank 0 holds all three and rank 1 none (offset = the extent).
  const Layout small(Mesh({2}), {Placement::strided_shard(0, 2147483647)}, Dims{3});
  EXPECT_EQ(small.local_shard(0).shape, Dims{3});
  EXPECT_EQ(small.local_shard(1).shape, Dims{0});
  EXPECT_EQ(small.local_shard(1).offset, Dims{3});
  EXPECT_THROW(Layout(Mesh({2}), {Placement::strided_shard(0, 0)}, Dims{4}), Error);
}

// PyTorch's own layouts (tests/data/pytorch_strided_layouts.json, from make_strided_fixture.py on PyTorch 2.11),
// when the fixture is present: every rank's local shape and global offset, and its placements as PyTorch prints
// them parse to the same layout.
TEST(ConformanceStrided, EveryPyTorchCaseMatches) {
  std::ifstream in(std::string(RESHARD_TEST_DATA_DIR) + "/pytorch_strided_layouts.json");
  if (!in.good()) GTEST_SKIP() << "tests/data/pytorch_strided_layouts.json is not there yet (make_strided_fixture.py)";
  const nlohmann::json fixture = nlohmann::json::parse(in);
  const auto& cases = fixture.at("cases");
  ASSERT_GE(cases.size(), 200u);
  int checked_ranks = 0, checked_indices = 0, inconsistent = 0;
  // Whether PyTorch's redistributed indices of a rank have the extent and first index its local-shape function gives.
  auto consistent = [](const nlohmann::json& r) {
    const auto shape = r.at("local_shape").get<std::vector<Index>>();
    const auto offset = r.at("global_offset").get<std::vector<Index>>();
    if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return false;
    for (size_t d = 0; d < shape.size(); ++d) {
      const auto ranges = r.at("indices").at(d).get<std::vector<std::vector<Index>>>();
      Index held = 0;
      for (const auto& iv : ranges) held += iv.at(1) - iv.at(0);
      if (held != shape[d] || ranges.empty() || ranges.front().at(0) != offset[d]) return false;
    }
    return true;
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    std::vector<Placement> placements;
    for (const auto& p : c.at("placements")) placements.push_back(parse_placement(p.get<std::string>()));
    if (c.contains("torch_placements")) {
      EXPECT_EQ(parse_placements(c.at("torch_placements").get<std::string>()), placements) << "case " << i;
    }
    const Layout layout(Mesh(c.at("mesh").get<std::vector<int>>()), placements,
                        Dims::from(c.at("global_shape").get<std::vector<Index>>()));
    ASSERT_EQ(static_cast<int>(c.at("ranks").size()), layout.mesh().size()) << "case " << i;
    for (const auto& r : c.at("ranks")) {
      const int rank = layout.mesh().rank_at(Dims::from(r.at("coord").get<std::vector<Index>>()));
      const LocalShard got = layout.local_shard(rank);
      EXPECT_EQ(got.shape.vec(), r.at("local_shape").get<std::vector<Index>>())
          << "case " << i << " " << layout.str() << " rank " << rank;
      EXPECT_EQ(got.offset.vec(), r.at("global_offset").get<std::vector<Index>>())
          << "case " << i << " " << layout.str() << " rank " << rank;
      // The global indices the rank holds after PyTorch's redistribute, as ranges per tensor dim, where PyTorch agrees
      // with itself: an empty local tensor has no indices to read back, and on some uneven layouts PyTorch 2.11's
      // redistribute puts other rows on a rank than its _compute_local_shape_and_global_offset reports (which reshard
      // follows, checked above); those ranks are counted, not compared.
      if (r.contains("indices") && !consistent(r)) {
        ++inconsistent;
      } else if (r.contains("indices")) {
        const Dims coord = layout.mesh().coord_of(rank);
        for (int d = 0; d < layout.ndim(); ++d) {
          std::vector<std::vector<Index>> mine;
          for (const Interval& iv : layout.ranges(d, coord)) mine.push_back({iv.begin, iv.end()});
          EXPECT_EQ(mine, r.at("indices").at(d).get<std::vector<std::vector<Index>>>())
              << "case " << i << " " << layout.str() << " rank " << rank << " dim " << d;
        }
        ++checked_indices;
      }
      ++checked_ranks;
    }
  }
  EXPECT_GT(checked_ranks, 800);
  EXPECT_GT(checked_indices, 800);
  std::cout << "strided fixture (" << fixture.value("source", "") << "): " << cases.size() << " cases, "
            << checked_ranks << " ranks, " << checked_indices << " with PyTorch's redistributed indices compared, "
            << inconsistent << " where PyTorch's redistribute and its local shape disagree (or the shard is empty)\n";
}

}  // namespace
}  // namespace reshard
