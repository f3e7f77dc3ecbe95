// A placement pair on a mesh for an extent x extent tensor: the planning benchmark's cases (bench/planner) and the
// tests that plan cases of the same kind.
#pragma once

#include <utility>
#include <vector>

#include "reshard/planner.hpp"

namespace reshard::testing {

struct SquareCase {
  const char* from;
  const char* to;
  std::vector<int> mesh;
  Index extent = 16384;
};

// The case's source and target layouts.
inline std::pair<Layout, Layout> layouts(const SquareCase& c) {
  Mesh mesh(c.mesh);
  return {Layout(mesh, parse_placements(c.from), Dims{c.extent, c.extent}),
          Layout(mesh, parse_placements(c.to), Dims{c.extent, c.extent})};
}

}  // namespace reshard::testing
