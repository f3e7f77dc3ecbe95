// RankProgram: one rank's part of a plan, lowered to buffer-relative operations the executor carries out.
//
// Buffers are the run's input tensor, its output tensor and one workspace; every reference is an element
// offset into one of them, so a program is independent of where the buffers live and can be replayed (or
// captured in a CUDA graph) with no host work. Each step is, in order:
//   pack (copies into contiguous send buffers) -> local copies, which may overlap the communication ->
//   one communication (an exchange of sends/receives in one group, or one collective) -> unpack.
// The workspace holds two intermediate tensors (for plans of several steps) and the largest step's scratch.
#pragma once

#include <optional>
#include <vector>

#include "reshard/plan.hpp"

namespace reshard {

enum class Buffer : unsigned char { kInput, kOutput, kWork };

struct BufferRef {
  Buffer buffer = Buffer::kInput;
  Index offset = 0;  // elements
  friend bool operator==(const BufferRef&, const BufferRef&) = default;
};

// Copies a box of `shape` elements between two strided views (strides in elements). The innermost dim always
// has stride 1 in both views (it may have extent 1), so a copy is a set of contiguous rows.
struct CopyRegion {
  BufferRef src, dst;
  Dims shape, src_strides, dst_strides;
};

// An elementwise reduction: dst = reduce(op, srcs...) / divisor over a box of `shape` elements, every view strided
// (innermost stride 1, as for copies). Reduces the contributions of a Partial source in a p2p step (f16 and bf16
// accumulate in f32, integers in 64 bits; contributions in the order listed) and partitions a Replicate value
// into a Partial one in a local step (divisor: the group size for sum on floating types; no sources: zeros).
struct ReduceRegion {
  Dims shape;
  BufferRef dst;
  Dims dst_strides;
  std::vector<BufferRef> srcs;
  std::vector<Dims> src_strides;
  ReduceOp op = ReduceOp::kSum;
  Index divisor = 1;
};

struct PeerTransfer {
  int peer = 0;  // rank in the mesh's communicator
  BufferRef buffer;
  Index elements = 0;
};

struct CollectiveOp {
  StepKind kind = StepKind::kAllGather;  // all_gather, reduce_scatter or all_reduce
  std::vector<int> mesh_dims;            // the sub-communicator
  BufferRef send, recv;
  Index elements = 0;  // all_gather: sent per member; reduce_scatter: received per member; all_reduce: total
  ReduceOp op = ReduceOp::kSum;
};

// One stage of a step: pack -> one communication -> unpack. A p2p or all_to_all step with large transfers that
// must be packed or unpacked is pipelined over several stages (chunks of those transfers), so that stage s+1 is
// packed while stage s is on the wire.
struct Stage {
  std::vector<CopyRegion> pack;
  std::vector<PeerTransfer> sends, recvs;  // one group
  std::optional<CollectiveOp> collective;  // collective steps (one stage)
  std::vector<CopyRegion> unpack;
  std::vector<ReduceRegion> reduce;  // after the communication (with unpack), or alone in a local step
};

struct ProgramStep {
  StepKind kind = StepKind::kLocal;
  std::vector<CopyRegion> local;  // local copies, which may run concurrently with the stages
  std::vector<Stage> stages;
};

struct RankProgram {
  int rank = 0;
  DType dtype = DType::kF32;
  Index input_elements = 0;   // the rank's source local tensor
  Index output_elements = 0;  // the rank's target local tensor
  Index work_elements = 0;    // workspace the executor allocates at prepare
  std::vector<ProgramStep> steps;
  std::vector<std::vector<int>> communicator_dims;  // distinct mesh-dim sets of the collectives, in first-use order
};

// Lowers one rank's part of a plan. For a rank-scoped plan the rank must be the plan's rank.
RankProgram lower(const Plan& plan, int rank);

// Elements written by a list of copies.
Index copy_elements(const std::vector<CopyRegion>& regions);

}  // namespace reshard
