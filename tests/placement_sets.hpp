// Every placement list over a mesh's dims (of R and S(d), or of any choices), for the exhaustive tests.
#pragma once

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

}  // namespace reshard::testing
