#include "args.hpp"

#include "reshard/error.hpp"
#include "reshard/plan_option_table.hpp"
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

namespace {

// The source and target meshes: one mesh, or (with dst_mesh, dst_ranks or world_size) two meshes of one world.
std::pair<Mesh, Mesh> make_meshes(const PlanArgs& args) {
  if (!args.dst_mesh && !args.dst_ranks && !args.world_size) {
    const Mesh mesh = make_mesh(args.mesh, args.ranks);
    return {mesh, mesh};
  }
  auto side = [](const std::string& text, const std::optional<std::vector<int>>& given) {
    const Mesh row_major(parse_mesh_shape(text));
    return std::pair{row_major.shape(), given ? *given : row_major.ranks()};
  };
  auto [from_shape, from_ranks] = side(args.mesh, args.ranks);
  auto [to_shape, to_ranks] = side(args.dst_mesh.value_or(args.mesh), args.dst_mesh    ? args.dst_ranks
                                                                      : args.dst_ranks ? args.dst_ranks
                                                                                       : args.ranks);
  int world = 0;
  if (args.world_size) {
    world = *args.world_size;
  } else {
    for (const std::vector<int>* ranks : {&from_ranks, &to_ranks})
      for (int r : *ranks) world = std::max(world, r + 1);
  }
  return {Mesh(from_shape, from_ranks, world), Mesh(to_shape, to_ranks, world)};
}

}  // namespace

PlanRequest make_plan_request(const PlanArgs& args) {
  const auto [from_mesh, to_mesh] = make_meshes(args);
  Dims shape = make_shape(args.shape);
  const DType dtype = parse_dtype(args.dtype);
  PlanRequest req{Layout(from_mesh, parse_placements(args.src), shape),
                  Layout(to_mesh, parse_placements(args.dst), shape), dtype,
                  args.to_dtype ? parse_dtype(*args.to_dtype) : dtype, PlanOptions{}};
  if (req.to_dtype != req.dtype) validate_conversion(req.dst, req.dtype, req.to_dtype);
  // Every option through the plan option table, as the CLI sets its flags: the same parsing, ranges and messages.
  for (const auto& [name, text] : args.options) set_plan_option(req.options, name, text);
  return req;
}

PlanRequest make_batch_request(const PlanArgs& args, size_t t) {
  try {
    return make_plan_request(args);
  } catch (const Error& e) {
    throw Error(e.kind(), cat("tensor ", t, ": ", e.what()));
  }
}

}  // namespace reshard::python
