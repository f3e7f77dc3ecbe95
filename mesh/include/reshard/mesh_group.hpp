// A communicator's group on a mesh: this rank's group over some mesh dims, or over dims of the mesh with one dim
// split in two (a node split: the members on one node, or one member per node; Step::hierarchical).
#pragma once

#include <vector>

#include "reshard/mesh.hpp"

namespace reshard {

// This rank's group over `mesh_dims` of a mesh, or, with split_dim >= 0, of that mesh with dim split_dim (size s)
// viewed as two, (s / split_parts, split_parts), the dims numbered on the view.
struct GroupSpec {
  std::vector<int> mesh_dims;
  int split_dim = -1;
  int split_parts = 0;
  friend bool operator==(const GroupSpec&, const GroupSpec&) = default;
};

// The mesh a group's dims refer to: `mesh` itself, or its view with split_dim split (kInvalidArgument where
// split_parts does not divide that dim).
Mesh group_mesh(const Mesh& mesh, const GroupSpec& group);

}  // namespace reshard
