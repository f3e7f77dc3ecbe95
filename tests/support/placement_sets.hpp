// Every placement list over a mesh's dims (of R and S(d), or of any choices), and the mesh parameters and test
// names of the exhaustive suites.
#pragma once

#include <string>
#include <vector>

#include "reshard/placement.hpp"

namespace reshard::testing {

// Every list of mesh_ndim placements drawn from `options`, in lexicographic order of that list (options ordered as
// given).
inline std::vector<std::vector<Placement>> placement_lists(int mesh_ndim, const std::vector<Placement>& options) {
  std::vector<std::vector<Placement>> out{{}};
  for (int k = 0; k < mesh_ndim; ++k) {
    std::vector<std::vector<Placement>> next;
    for (const auto& prefix : out)
      for (const Placement& p : options) {
        next.push_back(prefix);
        next.back().push_back(p);
      }
    out = std::move(next);
  }
  return out;
}

// Every list of mesh_ndim placements drawn from R, S0 .. S(tensor_ndim-1), in lexicographic order of that list.
inline std::vector<std::vector<Placement>> all_placements(int mesh_ndim, int tensor_ndim) {
  std::vector<Placement> options{Placement::replicate()};
  for (int d = 0; d < tensor_ndim; ++d) options.push_back(Placement::shard(d));
  return placement_lists(mesh_ndim, options);
}

// A parameter of the exhaustive suites: a mesh and the tensor's rank.
struct MeshCase {
  std::vector<int> mesh;
  int tensor_ndim;
};

// A mesh as part of a test's name: "mesh_2_2".
inline std::string mesh_name(const std::vector<int>& mesh) {
  std::string s = "mesh";
  for (int m : mesh) {
    s += '_';
    s += std::to_string(m);
  }
  return s;
}

// A MeshCase's test name: "mesh_2_2_rank3".
inline std::string mesh_case_name(const MeshCase& c) {
  return mesh_name(c.mesh) + "_rank" + std::to_string(c.tensor_ndim);
}

}  // namespace reshard::testing
