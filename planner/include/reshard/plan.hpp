// Plan: an immutable, serialisable description of how to turn every rank's source local tensor into its
// target local tensor.
//
// A plan is a chain of steps L0 -> L1 -> ... -> Lk over layouts of the same tensor, with L0 = src and Lk = dst (up
// to mesh dims of size 1, whose placement never changes any box). L0 is on the source mesh and L1 ... Lk on the
// target mesh: usually the same one. Source and target meshes may differ when both sit in one world of ranks
// (Mesh::world_size); then step 0 is p2p and moves the tensor between them (transfers name world ranks, and a
// Partial source's contributions are all reduced), and later steps run on the target mesh. Step kinds:
//  - p2p:            a set of transfers run concurrently (one NCCL group). A transfer moves a region (global
//                    coordinates) from rank `src`'s local tensor in L_i to rank `dst`'s local tensor in L_i+1;
//                    src == dst is a local copy. The transfers into each rank tile its L_i+1 box exactly — once
//                    per contribution when L_i is Partial on mesh dims that L_i+1 is not (partial.hpp): the
//                    receiver reduces the contributions of each region (a local one included).
//  - all_gather:     on the group of each rank over `mesh_dims`: every member contributes its L_i tensor and
//                    keeps its L_i+1 box out of the union.
//  - all_to_all:     on the same groups: every member sends member g the part of its L_i box inside g's L_i+1
//                    box (grouped send/recv).
//  - reduce_scatter: Partial -> Shard over `mesh_dims`: member g receives the reduction of its L_i+1 box.
//  - all_reduce:     Partial -> Replicate over `mesh_dims`.
//  - local:          no communication: each rank copies its L_i+1 box out of its L_i tensor, partitioning the
//                    value on mesh dims that go from Replicate to Partial (partial.hpp).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "reshard/dtype.hpp"
#include "reshard/layout.hpp"
#include "reshard/topology.hpp"

namespace reshard {

enum class Strategy { kAuto, kCollective, kP2P, kHybrid };
enum class StepKind { kP2P, kAllGather, kAllToAll, kReduceScatter, kAllReduce, kLocal };
// How a communicating step moves its data. nccl: two-sided (NCCL send/recv and collectives; staged through
// workspace where regions are strided), everywhere NCCL runs. nvlink: one-sided copies straight from the sender's
// source tensor into the receiver's target tensor, for ranks that can address each other's memory (one host, peer
// access). A step never holds kAuto; PlanOptions::transport does (the planner prices both).
enum class Transport { kAuto, kNccl, kNvlink };
// Whether p2p steps on nccl across nodes relay (Step::relayed): by cost (auto), wherever the rule relays something
// (always), or never.
enum class Relay { kAuto, kAlways, kNever };
// Whether one-sided steps fuse their flags and their copies (or reductions) into one kernel per rank per call.
enum class Fusion { kAuto, kAlways, kNever };
// A fused step reads from at most this many peers per rank (the kernel's table of peer buffers).
inline constexpr int kMaxFusedPeers = 15;

std::string_view to_string(Strategy s);
std::string_view to_string(StepKind k);
std::string_view to_string(Transport t);
Strategy parse_strategy(std::string_view text);    // auto | collective | p2p | hybrid
Transport parse_transport(std::string_view text);  // auto | nccl | nvlink
Fusion parse_fusion(std::string_view text);        // auto | always | never
Relay parse_relay(std::string_view text);          // auto | always | never
StepKind parse_step_kind(std::string_view text);
// Whether a step of this kind communicates (everything but local).
bool is_communication(StepKind k);

struct Transfer {
  int src = 0;
  int dst = 0;
  Box region;  // global coordinates
  Index bytes = 0;
  // -1: src sends the region itself. Otherwise the transfer is relayed (Step::relayed): rank `via` receives the same
  // region from src in the same step (a transfer of its own) and forwards it to dst out of its L_i+1 tensor, after
  // the step's other transfers.
  int via = -1;

  bool is_local() const { return src == dst; }
  bool is_relayed() const { return via >= 0; }
  // The rank whose bytes reach dst: `via` for a relayed transfer, else src.
  int sender() const { return via >= 0 ? via : src; }
  friend bool operator==(const Transfer&, const Transfer&) = default;
};

struct Step {
  StepKind kind = StepKind::kLocal;
  std::vector<int> mesh_dims;       // collectives: the mesh dims of the groups (flattened in this order)
  std::vector<Placement> from, to;  // placements of L_i and L_i+1
  std::vector<Transfer> transfers;  // p2p only
  double estimated_us = 0;
  Index bytes_moved = 0;                   // bytes crossing between ranks in this step, summed over ranks
  Transport transport = Transport::kNccl;  // communicating steps: nccl, or nvlink (p2p steps within one host)
  bool fused = false;  // nvlink steps: one kernel per rank per call (flags, peer loads and local copies fused)
  // p2p steps on nccl: a region that several ranks of one node receive from one sender on another node crosses into
  // the node once, to one of them, which forwards it to the others (Transfer::via; relays.hpp states the rule). The
  // step then runs in two phases: its direct transfers, then the relayed ones.
  bool relayed = false;
  // p2p steps on nccl where the topology has peer access: the transfers between ranks of one node run one-sided (as an
  // nvlink step's, pulled, never fused), concurrently with those between nodes, which run on nccl; a relayed step's
  // forwarding (within a node) runs one-sided too. A transfer's transport: nvlink when its two ranks share a node.
  // A hierarchical all_reduce (below) that mixes runs its two node stages one-sided (each member reduces its piece
  // reading the node's contributions in place, then reads the other members' reduced pieces) and only the piece's
  // all_reduce between nodes on nccl; not in a plan for changing buffers (its readers would map the peers' tensors on
  // every call).
  bool mixed = false;
  // all_reduce steps whose groups span nodes with several members on each (node_split.hpp): reduce_scatter among the
  // members on one node, all_reduce of each piece among one member per node, all_gather on the node, so that each
  // byte of the reduced tensor crosses between nodes once per node rather than once per member.
  bool hierarchical = false;
  // The first step on nvlink of a plan for changing buffers (PlanSpec::buffers_change): every sending rank first
  // copies its source tensor into its workspace, and the peers read it there, so no call maps the caller's tensors.
  bool staged = false;
};

// In a step that mixes transports (Step::mixed): whether transfer t runs one-sided, its sender (the relay, for a
// relayed transfer) and its receiver sharing a node; the others run on nccl.
inline bool one_sided_in_mixed(const Topology& topology, const Transfer& t) {
  return topology.same_node(t.sender(), t.dst);
}

// One priced strategy, as listed in a plan.
struct Candidate {
  Strategy strategy = Strategy::kCollective;
  Transport transport = Transport::kNccl;  // of its p2p step (collective candidates: nccl)
  bool available = false;
  std::string reason;  // why it is not available, when it is not
  double estimated_us = 0;
  int steps = 0;
  Index bytes_moved = 0;
  Index peak_workspace_bytes = 0;
  bool fits_budget = true;
  std::string route;  // "S0,S1 -all_gather[1]-> S0,R -> ..."
};

// Everything a plan holds; the planner and the JSON loader fill it in, Plan validates and freezes it.
struct PlanSpec {
  Layout src, dst;
  DType dtype = DType::kF32;
  // Set: the target's dtype, when it differs from the source's (dtype_convert.hpp's pairs). Every step moves elements
  // of `dtype`; the writes into the target tensor convert (copies, unpacks and reductions), so a Partial source is
  // reduced in `dtype` and then converted once. The target may not be Partial then (its contributions would be
  // converted one by one, and their reduction would not be the converted value).
  std::optional<DType> to_dtype;
  Topology topology;
  std::string profile_name;
  std::optional<Index> memory_budget_bytes;
  std::optional<int> scope_rank;   // set: p2p steps hold only the transfers this rank sends or receives
  Index pipeline_chunk_bytes = 0;  // p2p transfers that need packing are pipelined in chunks of this size (0: off)
  // Copies (nvlink steps' peer regions, local steps) with contiguous rows at least this long, at most 3-D, run on the
  // copy engines; others on a kernel (step_geometry's rule, from the profile).
  Index copy_engine_min_row_bytes = 2048;
  bool low_sm = false;          // priced in low-SM mode (PlanOptions::low_sm): SM kernels' time scaled by the profile
  bool buffers_change = false;  // planned for tensors that change every call (PlanOptions::buffers_change)
  Strategy strategy = Strategy::kCollective;
  double estimated_us = 0;
  Index bytes_moved = 0;
  Index peak_workspace_bytes = 0;
  std::vector<Candidate> candidates;
  std::vector<Step> steps;
};

class Plan;
namespace detail {
// Candidates some of whose figures are computed on first use (internal to the planner: pending_candidates.hpp).
class PendingCandidates;
// Freezes a spec the planner itself built, without validate_plan (internal to the planner: the reference planner's
// plans are validated, and tests/planner/planner_equivalence_test.cpp requires the fast planner's to equal them).
// With `pending`, the plan's candidates are pending's (spec.candidates is ignored), completed when first read.
Plan trusted_plan(PlanSpec spec, std::shared_ptr<PendingCandidates> pending = nullptr);
}  // namespace detail

class Plan {
 public:
  // Validates the spec (see validate_plan) and freezes it.
  explicit Plan(PlanSpec spec);

  const Layout& src() const { return s_.src; }
  const Layout& dst() const { return s_.dst; }
  DType dtype() const { return s_.dtype; }
  int element_size() const { return reshard::element_size(s_.dtype); }
  // The target tensor's dtype (PlanSpec::to_dtype, else dtype()) and its element size.
  DType target_dtype() const { return s_.to_dtype.value_or(s_.dtype); }
  int target_element_size() const { return reshard::element_size(target_dtype()); }
  // Whether the move converts the elements (target_dtype() != dtype()).
  bool converts() const { return target_dtype() != s_.dtype; }
  const Topology& topology() const { return s_.topology; }
  const std::string& profile_name() const { return s_.profile_name; }
  const std::optional<Index>& memory_budget_bytes() const { return s_.memory_budget_bytes; }
  const std::optional<int>& scope_rank() const { return s_.scope_rank; }
  Index pipeline_chunk_bytes() const { return s_.pipeline_chunk_bytes; }
  Index copy_engine_min_row_bytes() const { return s_.copy_engine_min_row_bytes; }
  bool low_sm() const { return s_.low_sm; }
  bool buffers_change() const { return s_.buffers_change; }
  Strategy strategy() const { return s_.strategy; }
  double estimated_us() const { return s_.estimated_us; }
  Index bytes_moved() const { return s_.bytes_moved; }
  Index peak_workspace_bytes() const { return s_.peak_workspace_bytes; }
  // Every candidate priced. Without a memory budget the planner leaves what ranking does not need to the first call:
  // the losing candidates' peak workspace and route, and every figure of a candidate whose search showed it costs more
  // than one built before it. That call plans those candidates again in full (thread-safe, once per plan and its
  // copies), so it may cost as much as the planning did; the figures are the same as if they had been computed at
  // once (tests/planner/pending_candidates_test.cpp, and the reference planner's in
  // tests/planner/planner_equivalence_test.cpp).
  const std::vector<Candidate>& candidates() const;
  const std::vector<Step>& steps() const { return s_.steps; }
  // A copy of everything the plan holds, its candidates complete (as candidates() gives them).
  PlanSpec spec() const;

  // Layout before step i (i == steps().size() gives the layout after the last step).
  Layout layout_before(size_t i) const;
  // Number of steps that communicate.
  int communication_steps() const;
  // nvlink when a step runs on it (its p2p step), nccl otherwise.
  Transport transport() const;

 private:
  struct Trusted {};
  Plan(PlanSpec spec, std::shared_ptr<detail::PendingCandidates> pending, Trusted)
      : s_(std::move(spec)), pending_(std::move(pending)) {}
  friend Plan detail::trusted_plan(PlanSpec spec, std::shared_ptr<detail::PendingCandidates> pending);

  PlanSpec s_;
  std::shared_ptr<detail::PendingCandidates> pending_;  // set: the candidates (s_.candidates is empty)
};

// The most transfers a plan holds over all its steps (about 160 bytes each: 640 MiB at the limit). A global p2p plan
// lists one per pair of ranks whose boxes overlap (up to ranks^2): the planner refuses one past this before listing
// it, and a plan file past it is refused while its steps are read, naming the limit; a rank's plan (make_rank_plan)
// holds only that rank's transfers.
inline constexpr size_t kMaxPlanTransfers = size_t(1) << 22;
// The work of checking a plan grows with its steps times its world's ranks (each step's boxes, prices and scratch are
// per rank): validate_plan refuses a plan past this, naming it, before checking any step (16 steps on the largest
// mesh, kMaxRanks).
inline constexpr Index kMaxPlanRankSteps = Index(1) << 24;

// Checks a spec: same world size and shape for src and dst (a first step that is p2p where their meshes differ); a
// continuous chain of steps from src to dst; collective steps that change only their mesh dims with the placement
// changes their kind allows; p2p transfers whose ranks exist, whose regions lie in the sender's L_i box and the
// receiver's L_i+1 box, and which tile every receiver's box exactly (for a rank-scoped plan: that rank's box); at
// most kMaxPlanRankSteps steps x ranks; a strategy the steps make (a collective plan has no p2p step, a p2p plan no
// collective one, a hybrid plan a p2p step and a collective step or a local step before the p2p one).
// kInvalidArgument naming the step otherwise.
void validate_plan(const PlanSpec& spec);

// Checks a conversion in the move (PlanSpec::to_dtype): a pair dtype_convert.hpp allows (to_dtype != dtype) and a
// target that is not Partial on a mesh dim of more than one rank. kInvalidArgument, one line naming the problem.
void validate_conversion(const Layout& dst, DType dtype, DType to_dtype);

// Whether the plan maps identical layouts (one mesh and shape, the same canonical placements) and moves no byte
// between ranks, whatever its strategy (a collective plan's local step, a p2p plan's local copies): every rank's target
// local tensor is then its source local tensor, element for element, so a run in place (output == input, as DTensor
// returns its input for an unchanged placement) has nothing to do (Executor::run). A plan between two meshes that
// holds the same ranks re-partitions Partial contributions through the peers: not an identity.
bool is_identity(const Plan& plan);

// Placements with every size-1 mesh dim set to Replicate: two layouts with the same canonical placements have
// the same box on every rank (and Partial over one rank is the full value).
std::vector<Placement> canonical_placements(const Mesh& mesh, const std::vector<Placement>& placements);

// The layout before step i of a chain from `src` to `dst` (i == steps.size(): after the last step): on the source
// mesh before step 0, on the target mesh after it.
Layout step_layout(const Layout& src, const Layout& dst, const std::vector<Step>& steps, size_t i);

}  // namespace reshard
