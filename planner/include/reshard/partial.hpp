// Partial placements in plans: which mesh dims a step reduces, keeps or creates, and what creating one means.
//
// A Partial(op) layout holds, on every rank of a Partial mesh dim, a full-shape contribution; the true value is
// the reduction of the contributions over that dim. A step from placements `from` to `to` treats each mesh dim k
// (of size > 1) where either side is Partial in one of three ways:
//   reduced: from[k] is Partial(op), to[k] is not that same Partial. The contributions are reduced (all_reduce,
//            reduce_scatter, or a p2p step whose receivers reduce every contribution in their unpack kernel).
//   kept:    from[k] and to[k] are the same Partial(op). Each coordinate of k keeps its own contribution; a p2p
//            step only moves data between ranks with the same coordinate on k.
//   created: to[k] is Partial(op), from[k] is not that same Partial. A local step partitions the (replicated)
//            value: PyTorch's Replicate -> Partial(sum) divides by the group size on floating types; on integer
//            types reshard keeps the value on coordinate 0 and zeros elsewhere, so results stay exact. avg, max and
//            min keep the value on every rank (the reduction of equal values is that value).
#pragma once

#include <vector>

#include "reshard/dtype.hpp"
#include "reshard/layout.hpp"
#include "reshard/mesh.hpp"
#include "reshard/placement.hpp"

namespace reshard {

struct PartialRoles {
  std::vector<int> reduced, kept, created;  // mesh dims, ascending
  ReduceOp reduce_op = ReduceOp::kSum;      // of the reduced dims (meaningful when `reduced` is not empty)
  bool mixed_reduce_ops = false;            // the reduced dims disagree on the op
  Index contributions = 1;                  // product of the reduced dims' sizes
};

// Roles of the mesh dims of sizes > 1 (size-1 dims hold the full value whatever their placement).
PartialRoles partial_roles(const Mesh& mesh, const std::vector<Placement>& from, const std::vector<Placement>& to);
// The roles of a step between two layouts: as above on one mesh that spans its world; between different meshes (or
// on a mesh that is a subset of its world, planned the same way) every Partial dim of `from` is reduced and every
// Partial dim of `to` created (a contribution has no coordinate to stay on).
PartialRoles partial_roles(const Layout& from, const Layout& to);

// `to` with every created Partial replaced by Replicate: what communication delivers before the local partition.
std::vector<Placement> without_created_partials(const Mesh& mesh, const std::vector<Placement>& from,
                                                const std::vector<Placement>& to);

// Whether a step from `from` to `to`, on the way to `target`, keeps reductions exact on `dtype`. Integer avg is a
// truncating division, so it must happen once: a step that reduces Partial(avg) dims must reduce every one of
// them that `target` does not keep. And NCCL's collectives accumulate 8-bit integers in 8 bits, so `collective`
// avg steps on i8/u8 are refused (the p2p reduction accumulates in 64 bits).
bool reduction_exact(const Mesh& mesh, const std::vector<Placement>& from, const std::vector<Placement>& to,
                     const std::vector<Placement>& target, DType dtype, bool collective);

// How a rank partitions a replicated value when a local step creates Partial(op) on `dims`.
struct Partition {
  bool zero = false;  // write zeros instead of the value (integer sum, a rank off coordinate 0 on some dim)
  Index divisor = 1;  // divide the value by this (floating sum: the product of the dims' sizes)
};
Partition partition_for(const Mesh& mesh, const std::vector<Placement>& to, const std::vector<int>& dims, DType dtype,
                        const Dims& coord);

}  // namespace reshard
