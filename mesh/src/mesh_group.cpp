#include "reshard/mesh_group.hpp"

#include "reshard/error.hpp"

namespace reshard {

Mesh group_mesh(const Mesh& mesh, const GroupSpec& group) {
  if (group.split_dim < 0) return mesh;
  const int d = group.split_dim, s = mesh.dim_size(d);
  RESHARD_REQUIRE(group.split_parts >= 1 && s % group.split_parts == 0, "a group splits mesh dim ", d, " of size ", s,
                  " into parts of ", group.split_parts);
  std::vector<int> shape = mesh.shape();
  shape[d] = s / group.split_parts;
  shape.insert(shape.begin() + d + 1, group.split_parts);
  return mesh.has_explicit_ranks() ? Mesh(std::move(shape), mesh.explicit_ranks(), mesh.world_size())
                                   : Mesh(std::move(shape));
}

}  // namespace reshard
