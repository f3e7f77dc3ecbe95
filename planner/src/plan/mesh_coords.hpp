// Row-major numbering of the coordinates of a subset of a mesh's dims (the planner's block and replica indices).
#pragma once

#include <vector>

#include "reshard/mesh.hpp"

namespace reshard::detail {

// How many coordinates the mesh dims `dims` span together.
inline Index combos(const Mesh& mesh, std::span<const int> dims) {
  Index n = 1;
  for (int k : dims) n *= mesh.dim_size(k);
  return n;
}

// Row-major decode of `index` into the coordinates of `dims` (other entries of `coord` untouched).
inline void decode(const Mesh& mesh, std::span<const int> dims, Index index, Dims& coord) {
  for (int j = static_cast<int>(dims.size()) - 1; j >= 0; --j) {
    const Index n = mesh.dim_size(dims[j]);
    coord[dims[j]] = index % n;
    index /= n;
  }
}

// Row-major index of the coordinates of `dims` in `coord` (decode's inverse).
inline Index encode(const Mesh& mesh, std::span<const int> dims, const Dims& coord) {
  Index index = 0;
  for (int k : dims) index = index * mesh.dim_size(k) + coord[k];
  return index;
}

}  // namespace reshard::detail
