// Scheduling one lowered step into the program's operations: which lane each runs on and what it waits for
// (internal to the planner's lowering). The executor follows the result, deriving nothing.
#pragma once

#include <optional>
#include <vector>

#include "reshard/program.hpp"

namespace reshard::detail {

// One stage of a two-sided step: pack -> one communication -> unpack (and reductions).
struct StageParts {
  std::vector<CopyRegion> pack, unpack;
  std::vector<PeerTransfer> sends, recvs;
  std::optional<CollectiveOp> collective;
  std::vector<ReduceRegion> reduce;
  // Parallel to sends and recvs: where the message is staged (kStagedHere | kStagedThere: packed by the sender,
  // unpacked or reduced by the receiver), so that a batch can lay messages between the same two ranks out next to
  // each other and send them as one (lowering_batch.cpp).
  std::vector<unsigned char> sends_staging, recvs_staging;
};

// Staging flags of a message (StageParts::sends_staging): staged on this rank's side, on the other rank's.
inline constexpr unsigned char kStagedHere = 1, kStagedThere = 2;

// A one-sided step (NVLink): ready -> copies and reductions reading the peers' tensors -> done.
struct OneSidedParts {
  // A staged step (Step::staged): the copy of this rank's source tensor into its scratch, before anything else.
  std::vector<CopyRegion> stage;
  CopyEngine stage_engine = CopyEngine::kKernel;
  PeerSync ready, done;
  std::vector<CopyRegion> engine_copies, kernel_copies;  // peer regions on the copy engines, or one kernel
  std::vector<ReduceRegion> reduce;
  bool fused = false;  // everything in one launch (FusedPeerStep): its copies, or its reductions
};

// Everything one rank does in one step: its local copies (on a kernel, or on the copy engines) and either stages or
// a one-sided part.
struct StepParts {
  std::vector<CopyRegion> local, local_engine;
  std::vector<StageParts> stages;
  std::optional<OneSidedParts> one_sided;
};

// Local copies larger than this run on a side lane, overlapping the communication; smaller ones ride in the first
// pack launch (forking a lane costs more than the overlap saves).
inline constexpr Index kOverlapLocalBytes = 4 << 20;

// Low-SM mode (Plan::low_sm: the caller runs compute beside the redistribution) issues copy-engine copies in pieces of
// at most this many bytes: one large strided copy slows a GEMM beside it by about a quarter and itself runs at a
// quarter of its rate, pieces of 16 MiB slow the GEMM by at most 2% (bench/probes/local_copy_beside_gemm.cu;
// docs/planner.md, "Low-SM mode").
inline constexpr Index kLowSmEngineCopyBytes = 16 << 20;

// Splits every region larger than `max_bytes` along its outermost dim into pieces of at most `max_bytes` (at least
// one slice of that dim each), in order; the pieces cover exactly the region's elements.
void split_engine_copies(std::vector<CopyRegion>& regions, int element_size, Index max_bytes);

// Appends the step's operations to `ops`:
//  - two-sided, one stage: pack (with small local copies) -> [large local copies start on their lane] ->
//    communication -> unpack -> reductions -> join;
//  - pipelined, kLanes: stage s packs on the pack lane once stage s-2 has sent (the two scratch slots rotate), its
//    communication waits for its pack and for stage s-2's unpack, and it unpacks on the unpack lane; kSerial: the
//    stages one after another on the main lane; large local copies on their lane either way;
//  - mixed (both stages and a one-sided part: Step::mixed): the stages one after another on the pack lane, from a fork
//    point, beside the one-sided part on the main lane as below; joined at the end;
//  - one-sided: [large local copies on their lane] -> ready -> copies and reductions -> [small local copies] -> done
//    -> join;
//  - local steps: copy-engine copies, then kernel copies or reductions, on the main lane.
void schedule_step(StepParts parts, int step, int element_size, StageSchedule schedule, std::vector<Op>& ops);

}  // namespace reshard::detail
