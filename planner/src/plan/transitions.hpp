// Single-collective transitions between layouts, and the per-rank geometry of gathers and scatters.
// Internal to the planner; pricing and lowering both use these so they always agree.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "reshard/plan.hpp"
#include "reshard/rank_boxes.hpp"

namespace reshard::detail {

// The kind of the single collective that turns placements `from` into `to`, which differ exactly on `dims`:
//   every dim S->R: all_gather; every dim S(i)->S(j): all_to_all; every dim R->S or R->P: local (chunk, partition);
//   every dim P->R: all_reduce; every dim P->S: reduce_scatter (one reduce op for all dims).
// nullopt when no single collective does it.
std::optional<StepKind> transition_kind(const std::vector<Placement>& from, const std::vector<Placement>& to,
                                        std::span<const int> dims);

// Whether the step moves the data of layout `a` into layout `b`: for gathers and all_to_all every rank's b box
// lies in the union of its group's a boxes; for local, reduce_scatter and all_reduce in its own a box.
// Exact for uneven and nested sharding; uses the per-dim product structure of boxes (no per-pair scan except for
// layouts with empty shards).
bool transition_valid(const Layout& a, const Layout& b, StepKind kind, std::span<const int> dims);
// The same check with the boxes at hand (faster when a layout has empty shards).
bool transition_valid(const RankBoxes& a, const RankBoxes& b, StepKind kind, std::span<const int> dims);

// A rank's group over `dims` in sizes and in-place flags only (what gather_geometry and scatter_geometry compute
// besides the group's ranks): pricing asks for it in its inner loops, without listing the group.
struct GroupShape {
  int size = 0;                // members
  Index chunk = 0;             // as GatherGeometry::chunk / ScatterGeometry::chunk
  bool send_in_place = false;  // as in GatherGeometry / ScatterGeometry
  bool recv_in_place = false;
};
GroupShape gather_shape(const RankBoxes& a, const RankBoxes& b, std::span<const int> dims, int rank);
GroupShape scatter_shape(const RankBoxes& a, const RankBoxes& b, std::span<const int> dims, int rank);

// One rank's side of an all_gather over `dims` (a -> b).
struct GatherGeometry {
  std::vector<int> group;      // ranks, in group order
  int index = 0;               // this rank's position in group
  Index chunk = 0;             // elements each member contributes (the group's largest a box; smaller ones are padded)
  bool send_in_place = false;  // this rank's a tensor is exactly one chunk: send it without a copy
  bool recv_in_place = false;  // the gathered chunks, back to back, are exactly this rank's b tensor
};
GatherGeometry gather_geometry(const RankBoxes& a, const RankBoxes& b, std::span<const int> dims, int rank);

// One rank's side of a reduce_scatter over `dims` (a -> b).
struct ScatterGeometry {
  std::vector<int> group;
  int index = 0;
  Index chunk = 0;             // elements each member receives (the group's largest b box)
  bool send_in_place = false;  // the members' b boxes, back to back in group order, are exactly this a tensor
  bool recv_in_place = false;  // this rank's b box is exactly one chunk
};
ScatterGeometry scatter_geometry(const RankBoxes& a, const RankBoxes& b, std::span<const int> dims, int rank);

// The row-major strides of the mesh's dims (stride[k] for k < mesh.ndim()); returns the mesh's rank count.
inline Index mesh_strides(const Mesh& mesh, Index (&stride)[kMaxDims]) {
  const std::vector<int>& shape = mesh.shape();
  Index s = 1;
  for (int k = mesh.ndim() - 1; k >= 0; --k) {
    stride[k] = s;
    s *= shape[k];
  }
  return s;
}

// Calls f(member, j) for the j-th member of the group over `dims` whose first member sits at row-major position
// `linear` (mesh.group's order: row-major over `dims`); `stride` from mesh_strides.
template <class F>
void walk_group(const Mesh& mesh, const Index (&stride)[kMaxDims], Index linear, std::span<const int> dims, F f) {
  const std::vector<int>& shape = mesh.shape();
  const int m = static_cast<int>(dims.size());
  Index at[kMaxDims] = {};
  for (int j = 0;; ++j) {
    f(mesh.has_explicit_ranks() ? mesh.explicit_ranks()[linear] : static_cast<int>(linear), j);
    int i = m - 1;
    while (i >= 0 && ++at[i] == shape[dims[i]]) {
      linear -= (shape[dims[i]] - 1) * stride[dims[i]];
      at[i--] = 0;
    }
    if (i < 0) return;
    linear += stride[dims[i]];
  }
}

// Calls f(member, j) for the j-th member of rank's group over `dims` (mesh.group's order: row-major over `dims`),
// without listing the group.
template <class F>
void for_each_member(const Mesh& mesh, int rank, std::span<const int> dims, F f) {
  const std::vector<int>& shape = mesh.shape();
  const int nd = mesh.ndim();
  Index stride[kMaxDims];
  const Index s = mesh_strides(mesh, stride);
  Index linear = 0;  // the first member's row-major position
  if (!mesh.has_explicit_ranks() && rank >= 0 && rank < s) {
    // The rank is its row-major position: only its coordinates on `dims` are needed.
    linear = rank;
    for (int k : dims) linear -= rank / stride[k] % shape[k] * stride[k];
  } else {
    const Dims coord = mesh.coord_of(rank);  // (fails for a rank outside the mesh)
    for (int k = 0; k < nd; ++k) linear += coord[k] * stride[k];
    for (int k : dims) linear -= coord[k] * stride[k];
  }
  walk_group(mesh, stride, linear, dims, f);
}

// Size of the groups over `dims` and whether they span nodes (judged on the groups of the first and last rank).
int group_size(const Mesh& mesh, std::span<const int> dims);
LinkClass group_link(const Mesh& mesh, std::span<const int> dims, const Topology& topology);

}  // namespace reshard::detail
