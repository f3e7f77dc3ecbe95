// Fuzzes the planner on random layouts (up to 8 ranks, small tensors, uneven and empty shards, Partial placements):
// every plan it returns must pass the reference simulator (every target box tiled exactly from valid sources, every
// Partial contribution reduced exactly once, partitions as partial.hpp says) and, without Partial, its p2p
// candidate must move exactly the minimum number of bytes.
#include "fuzz_common.hpp"
#include "reshard/planner.hpp"
#include "simulator.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace reshard;
  fuzz::Bytes in(data, size);
  std::vector<int> mesh_shape(in.next(1, 3));
  int ranks = 1;
  for (int& m : mesh_shape) {
    m = in.next(1, 4);
    ranks *= m;
  }
  if (ranks > 8) return 0;
  int nd = in.next(1, 3);
  Dims shape(nd);
  for (int d = 0; d < nd; ++d) shape[d] = in.next(0, 9);
  // R, S(d) or Partial with one reduce op per layout (mixed ops are refused by the planner, and tested elsewhere).
  auto placements = [&] {
    std::vector<Placement> ps;
    const auto op = static_cast<ReduceOp>(in.next(0, 3));
    for (size_t k = 0; k < mesh_shape.size(); ++k) {
      int c = in.next(0, nd + 1);
      ps.push_back(c == 0 ? Placement::replicate() : c == nd + 1 ? Placement::partial(op) : Placement::shard(c - 1));
    }
    return ps;
  };
  Mesh mesh(mesh_shape);
  Layout src(mesh, placements(), shape), dst(mesh, placements(), shape);
  PlanOptions o;
  o.strategy = static_cast<Strategy>(in.next(0, 3));
  o.topology.ranks_per_node = in.next(1, 8);
  o.pipeline_chunk_bytes = in.next(0, 1) ? 8 : 0;
  DType dtype = kAllDTypes[in.next(0, 7)];
  fuzz::only_reshard_errors([&] {
    Plan plan =
        in.next(0, 1) ? make_plan(src, dst, dtype, o) : make_rank_plan(src, dst, dtype, in.next(0, ranks - 1), o);
    if (plan.scope_rank()) return;  // rank plans hold one rank's transfers: the simulator needs them all
    std::string err;
    if (testing::count_wrong(src, dst, testing::simulate(plan, testing::distribute(src)), dtype, &err) != 0) {
      std::fprintf(stderr, "%s -> [%s]: %s\n", src.str().c_str(), to_string(dst.placements()).c_str(), err.c_str());
      std::abort();
    }
    if (plan.strategy() == Strategy::kP2P && !src.has_partial() && !dst.has_partial() &&
        plan.bytes_moved() != testing::minimum_bytes(src, dst, element_size(dtype)))
      std::abort();
  });
  return 0;
}
