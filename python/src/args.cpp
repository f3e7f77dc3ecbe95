#include "args.hpp"

#include "reshard/error.hpp"
#include "reshard/profile.hpp"

namespace reshard::python {

Mesh make_mesh(const std::string& mesh, const std::optional<std::vector<int>>& ranks) {
  std::vector<int> shape = parse_mesh_shape(mesh);
  return ranks ? Mesh(shape, *ranks) : Mesh(shape);
}

Dims make_shape(const ShapeArg& shape) {
  if (const auto* text = std::get_if<std::string>(&shape)) return parse_shape(*text);
  const auto& dims = std::get<std::vector<std::int64_t>>(shape);
  RESHARD_REQUIRE(dims.empty(), "a shape given as a list goes through its text form; only [] (a scalar) arrives here");
  return Dims();
}

Layout make_layout(const LayoutArgs& args) {
  return Layout(make_mesh(args.mesh, args.ranks), parse_placements(args.placements), make_shape(args.shape));
}

PlanRequest make_plan_request(const PlanArgs& args) {
  Mesh mesh = make_mesh(args.mesh, args.ranks);
  Dims shape = make_shape(args.shape);
  PlanRequest req{Layout(mesh, parse_placements(args.src), shape), Layout(mesh, parse_placements(args.dst), shape),
                  parse_dtype(args.dtype), PlanOptions{}};
  req.options.strategy = parse_strategy(args.strategy);
  req.options.transport = parse_transport(args.transport);
  req.options.fusion = parse_fusion(args.fuse);
  req.options.low_sm = args.low_sm;
  RESHARD_REQUIRE(args.ranks_per_node >= 1, "--ranks-per-node must be >= 1, got ", args.ranks_per_node);
  req.options.topology.ranks_per_node = args.ranks_per_node;
  if (args.profile) req.options.profile = load_profile(*args.profile);
  if (args.memory_budget) {
    RESHARD_REQUIRE(*args.memory_budget >= 0, "--memory-budget must be >= 0 bytes, got ", *args.memory_budget);
    req.options.memory_budget_bytes = *args.memory_budget;
  }
  return req;
}

}  // namespace reshard::python
