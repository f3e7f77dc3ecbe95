// Arguments as the Python layer hands them over, turned into library values with the CLI's parsers, so that a bad
// value raises the message `reshard layout/plan` prints for the same text.
//
// The Python layer (reshard/_args.py) turns sequences into the CLI's text ("2x2", "S0,R", "8192x8192") before calling
// in; the one exception is a 0-d (scalar) shape, which has no CLI text and arrives as an empty list.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "reshard/layout.hpp"
#include "reshard/planner.hpp"

namespace reshard::python {

using ShapeArg = std::variant<std::string, std::vector<std::int64_t>>;

struct LayoutArgs {
  std::string mesh;                       // "2x2"
  std::optional<std::vector<int>> ranks;  // explicit rank at each row-major mesh coordinate
  std::string placements;                 // "S0,R"
  ShapeArg shape;                         // "8x8", or [] for a scalar
};

Mesh make_mesh(const std::string& mesh, const std::optional<std::vector<int>>& ranks);
Dims make_shape(const ShapeArg& shape);
Layout make_layout(const LayoutArgs& args);

struct PlanArgs {
  std::string mesh;
  std::optional<std::vector<int>> ranks;
  // A target on another mesh of the same world (the CLI's --to-mesh, --to-ranks, --world-size): `mesh` and `ranks`
  // are then the source's; unset ranks are 0..n-1, an unset world one more than the largest rank of either mesh.
  std::optional<std::string> dst_mesh;
  std::optional<std::vector<int>> dst_ranks;
  std::optional<int> world_size;
  std::string src, dst;
  ShapeArg shape;
  std::string dtype = "f32";
  std::optional<std::string> to_dtype;  // the target's element type (a converting plan); unset: dtype
  // The plan options given, by the plan option table's names (plan_option_table.hpp), as text; unset ones keep
  // PlanOptions' defaults.
  std::map<std::string, std::string> options;
};

// The request the arguments name; a conversion (to_dtype) is checked here (validate_conversion).
PlanRequest make_plan_request(const PlanArgs& args);
// Tensor t of a batch: make_plan_request's request, its errors prefixed "tensor t: " (a batch converts only when
// every member converts the same pair: PlanBatch's rule, checked when the batch is made).
PlanRequest make_batch_request(const PlanArgs& args, size_t t);

}  // namespace reshard::python
