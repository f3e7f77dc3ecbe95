// Arguments as the Python layer hands them over, turned into library values with the CLI's parsers, so that a bad
// value raises the message `reshard layout/plan` prints for the same text.
//
// The Python layer (reshard/_args.py) turns sequences into the CLI's text ("2x2", "S0,R", "8192x8192") before calling
// in; the one exception is a 0-d (scalar) shape, which has no CLI text and arrives as an empty list.
#pragma once

#include <cstdint>
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
  std::string strategy = "auto";
  std::string transport = "auto";
  std::string fuse = "auto";
  bool low_sm = false;
  bool buffers_change = false;  // PlanOptions::buffers_change (reshard.torch: always)
  std::optional<std::int64_t> memory_budget;
  int ranks_per_node = 8;
  std::optional<std::string> profile;  // path of a profile JSON
  std::optional<int> max_collectives;
  std::optional<std::int64_t> pipeline_chunk;
};

struct PlanRequest {
  Layout src, dst;
  DType dtype;
  PlanOptions options;
};

PlanRequest make_plan_request(const PlanArgs& args);

}  // namespace reshard::python
