// RankProgram: one rank's part of a plan, lowered to a list of buffer-relative operations the executor carries out
// in order, one loop, deriving nothing.
//
// Buffers are the run's input tensor, its output tensor and one workspace (a batch's program: every tensor's input and
// output, BufferRef::tensor); every reference is an element offset into one of them (this rank's, or a peer's for
// one-sided steps), so a program is independent of where the buffers live
// and can be replayed (or captured in a CUDA graph) with no host work. Every operation runs on a lane (the caller's
// stream, or one of the device's side streams) after the operations listed in its `after` (on other lanes; the
// operations of one lane run in list order). A step is, on the NCCL transport:
//   pack (copies into contiguous send buffers) -> one communication (an exchange of sends/receives in one group, or
//   one collective) -> unpack, with large local copies on a side lane overlapping the communication;
// pipelined exchanges repeat pack -> exchange -> unpack per stage, on lanes (stage s+1 packs while stage s is on the
// wire) or serially. On the NVLink transport a step is: tell the peers this rank is ready -> wait for the peers it
// reads -> copies straight from the peers' tensors (and reductions reading them in place) -> tell the peers it is
// done -> wait for the peers that read this rank's tensors.
// The workspace holds two intermediate tensors (for plans of several steps) and the largest step's scratch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "reshard/mesh_group.hpp"
#include "reshard/plan.hpp"

namespace reshard {

enum class Buffer : unsigned char { kInput, kOutput, kWork };

struct BufferRef {
  Buffer buffer = Buffer::kInput;
  Index offset = 0;  // elements
  int peer = -1;     // -1: this rank's buffer; otherwise that rank's (communicator rank), read one-sided
  int tensor = 0;    // a batch's program (plan_batch.hpp): kInput/kOutput, and kWork of a peer: which tensor's
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
  std::optional<DType> dtype;  // unset: the program's; a batch's program sets it (offsets in its elements)
};

struct PeerTransfer {
  int peer = 0;  // rank in the mesh's communicator
  BufferRef buffer;
  Index elements = 0;
};

struct CollectiveOp {
  StepKind kind = StepKind::kAllGather;  // all_gather, reduce_scatter or all_reduce
  std::vector<int> mesh_dims;            // the sub-communicator (of the split mesh when split_dim >= 0)
  BufferRef send, recv;
  Index elements = 0;  // all_gather: sent per member; reduce_scatter: received per member; all_reduce: total
  ReduceOp op = ReduceOp::kSum;
  std::optional<DType> dtype;  // unset: the program's; a batch's program sets it (offsets and counts in its elements)
  int split_dim = -1, split_parts = 0;  // GroupSpec's: the mesh mesh_dims refer to
};

// The streams a program's operations run on: the caller's, and the device's side streams.
enum class Lane : unsigned char { kMain, kLocalCopy, kPack, kUnpack };
inline constexpr int kLaneCount = 4;

// Who does a batch of copies: SM kernels (one batched launch), or the copy engines (2-D/3-D copies, no SMs).
enum class CopyEngine : unsigned char { kKernel, kCopyEngine };

struct Copies {
  std::vector<CopyRegion> regions;
  CopyEngine engine = CopyEngine::kKernel;
  bool beside_communication = false;  // runs while communication moves data: a kernel may take fewer SMs
};

// The group a collective runs on.
inline GroupSpec group_of(const CollectiveOp& c) { return GroupSpec{c.mesh_dims, c.split_dim, c.split_parts}; }

struct Reductions {
  std::vector<ReduceRegion> regions;  // all of one dtype
};

// Every send and receive of one stage, as one group.
struct Exchange {
  std::vector<PeerTransfer> sends, recvs;
};

// One-sided ordering (NVLink steps): post `phase` to the ranks in `notify`, then wait until every rank in `await`
// posted it. kReady: "my source tensor is final, you may read it"; kDone: "I finished reading yours".
enum class SyncPhase : unsigned char { kReady, kDone };
struct PeerSync {
  SyncPhase phase = SyncPhase::kReady;
  std::vector<int> notify, await;
};

// A one-sided step fused into one launch (small steps): post ready, wait for the sources, copy every region (peer
// pulls and local copies) or, for a step from a Partial source, reduce every region from its contributors' memory
// (never both), post done, wait for the readers. `slot` (the plan step) selects the step's flags.
struct FusedPeerStep {
  std::vector<CopyRegion> regions;
  PeerSync ready, done;
  int slot = 0;
  std::vector<ReduceRegion> reduce;  // all of one dtype; non-empty only when `regions` is empty
};

// A point on a lane that operations on other lanes can wait for (the run's fork points and joins).
struct Mark {};

using OpBody = std::variant<Mark, Copies, Reductions, Exchange, CollectiveOp, PeerSync, FusedPeerStep>;

struct Op {
  OpBody body;
  Lane lane = Lane::kMain;
  std::vector<int> after;  // indices of earlier operations, on other lanes, this one waits for
  int step = 0;            // the plan step it belongs to
};

struct RankProgram {
  int rank = 0;
  DType dtype = DType::kF32;
  // Set: the output buffer's dtype (Plan::target_dtype()), different from `dtype`. kOutput references then count
  // elements of it, and every operation that writes the output converts: copies, reductions and fused steps (the
  // lowering stages receives and collectives that would land in the output, and copies into it run on kernels).
  std::optional<DType> output_dtype;
  Index input_elements = 0;   // the rank's source local tensor
  Index output_elements = 0;  // the rank's target local tensor
  Index work_elements = 0;    // workspace the executor allocates at prepare
  // A batch's program (plan_batch.hpp): dtype kU8 (copies and exchanges in bytes; a converting batch's: its members'
  // dtype), every tensor's source and target local tensor sizes in bytes (tensor i: BufferRef::tensor == i). Empty for
  // one plan's program.
  std::vector<Index> tensor_input_bytes, tensor_output_bytes;
  // A batch's program: where each tensor's part of the workspace starts (bytes). A peer's workspace reference of tensor
  // t (BufferRef::tensor) is relative to that peer's part for t, which may lie elsewhere in its workspace.
  std::vector<Index> tensor_work_offsets;
  // A batch's program: the tensors between identical layouts (is_identity), in order. They have no operations: run in
  // place (output == input) they need nothing, as DTensor returns its input for an unchanged placement; otherwise the
  // executor copies each whole, input to output, in one launch before step 0.
  std::vector<int> identity_tensors;
  int step_count = 0;
  std::vector<Op> ops;  // in issue order; every side lane's last operation is waited for by a later main-lane one
  std::vector<GroupSpec> communicators;  // distinct groups of the collectives, in first-use order
  bool one_sided = false;                // reads peers' buffers (needs peer access)
  // Plan facts, decided here so that the executor reads nothing but the program:
  bool identity = false;           // one plan between identical layouts (is_identity): nothing runs; in place
  bool maps_peer_tensors = false;  // a one-sided step addresses the peers' tensors, not only their workspaces
  // Every step's kind, transport, fused flag and mesh dims, and who copies (LowerOptions::one_sided), hashed: what
  // every rank of a one-sided program must agree on (a rank-scoped plan edited on one rank would copy wrong parts).
  std::uint64_t step_signature = 0;
  std::vector<std::string> step_names;  // one per step, for profiler ranges
};

// How the stages of a pipelined exchange (chunking.hpp) run.
enum class StageSchedule {
  kLanes,   // stage s+1 packs on a side lane while stage s is on the wire; unpacking on another side lane
  kSerial,  // pack, communicate, unpack stage by stage on the main lane (full-grid copies, nothing racing NCCL)
};

// A batch's program (plan_batch.hpp) sends the messages between two ranks of a stage as one where they are staged on
// both sides anyway, and stages messages of at most this many bytes on both sides to join them too (0: only those).
inline constexpr Index kDefaultCoalesceMaxBytes = Index{1} << 20;

// Who copies in a one-sided step without reductions. kPull: each rank copies out of its sources' tensors (the
// default). kPush: each rank copies into its readers' tensors; ready then means "you may write into my next tensor"
// and done "I finished writing into yours". Fused steps and reductions always pull. Every rank of a plan must lower
// with the same value.
enum class OneSidedCopies { kPull, kPush };

struct LowerOptions {
  StageSchedule stage_schedule = StageSchedule::kLanes;
  Index coalesce_max_bytes = kDefaultCoalesceMaxBytes;  // batches only (above)
  OneSidedCopies one_sided = OneSidedCopies::kPull;
};

// Lowers one rank's part of a plan. For a rank-scoped plan the rank must be the plan's rank.
RankProgram lower(const Plan& plan, int rank, const LowerOptions& options = {});

// Elements written by a list of copies.
Index copy_elements(const std::vector<CopyRegion>& regions);

// Bytes the program's exchanges send to ranks on other nodes of `topology` (what crosses between nodes on NCCL's
// send/recv; collective operations are not counted: CollectiveOp).
Index exchange_bytes_to_other_nodes(const RankProgram& program, const Topology& topology);

}  // namespace reshard
