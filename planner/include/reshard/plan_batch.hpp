// PlanBatch: the plans of several tensors that move together (a model's parameters, a layer's activations), run as one
// redistribution.
//
//   std::vector<reshard::BatchEntry> entries = {{w_src, w_dst, reshard::DType::kBF16}, {b_src, b_dst, kF32}};
//   reshard::PlanBatch batch = reshard::make_plan_batch(entries, options);
//   reshard::Executor exec(batch, comm, device);   // executor.hpp: run(inputs, outputs, stream)
//
// Every tensor is planned as it would be alone (make_plan); the batch only combines the plans. Lowered for a rank
// (lower() below), step k of every plan becomes one step of the batch's program: the exchanges of every tensor's
// step k (p2p and all_to_all stages, stage by stage) run as ONE group of sends and receives, its packs as one copy
// batch, its unpacks as one, its local copies as one, its reductions as one per dtype. all_gather and reduce_scatter
// steps become exchanges of the same regions (each member sends every other member its part of that member's box; a
// scatter's receiver reduces), so they merge too; all_reduce keeps one NCCL call per tensor within the step. Plans of
// different step counts or kinds merge by step index: a plan with fewer steps is simply absent from the later ones.
// Messages between one pair of ranks in a stage are laid out next to each other in the batch's staging area, in the
// same order on both ranks, and go as one send: those staged on both sides anyway, and those of at most
// LowerOptions::coalesce_max_bytes (copied into and out of the area to join). The batch's workspace is the sum of its
// tensors' workspaces plus that staging area.
//
// One-sided (nvlink) steps k of every plan merge too: their copies (pushed or pulled, as each plan lowers alone; fused
// steps run unfused) and reductions after one ready, before one done, in which each rank meets every rank it copies to
// or from in any member; members on NCCL in the same step run just before them.
//
// A batch converts dtypes as a whole (BatchEntry::to_dtype): when one member converts, every member converts the same
// pair (one dtype to one target dtype), and the batch's program counts elements of that dtype instead of bytes, its
// output elements of the target dtype, converted as a converting plan's are (RankProgram::output_dtype). A set with
// several pairs runs as one batch per pair.
//
// Limits: every plan on the same mesh and of the same scope (all global, or all scoped to one rank); at most
// kMaxBatchTensors tensors; one conversion for all or none. A batch of one is exactly its plan.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "reshard/plan.hpp"
#include "reshard/planner.hpp"
#include "reshard/program.hpp"

namespace reshard {

inline constexpr size_t kMaxBatchTensors = 65536;

// One tensor of a batch: what make_converting_plan takes (to_dtype unset: the target keeps dtype).
struct BatchEntry {
  Layout src, dst;
  DType dtype = DType::kF32;
  std::optional<DType> to_dtype;
};

class PlanBatch {
 public:
  // kInvalidArgument when the list is empty or too long, or the plans break a limit above (naming the tensor).
  explicit PlanBatch(std::vector<std::shared_ptr<const Plan>> plans);
  // A batch of one that refers to `plan` without owning it (`plan` must outlive the batch).
  static PlanBatch of(const Plan& plan);

  size_t size() const { return plans_.size(); }
  const Plan& plan(size_t i) const { return *plans_.at(i); }
  const std::vector<std::shared_ptr<const Plan>>& plans() const { return plans_; }
  const Mesh& mesh() const { return plans_.front()->src().mesh(); }
  // The most steps of any plan (the batch program's step count).
  int step_count() const;
  // Sums over the plans.
  double estimated_us() const;
  Index bytes_moved() const;
  // Whether the members convert (every one the same pair: plan(0).dtype() to plan(0).target_dtype()).
  bool converts() const { return plans_.front()->converts(); }

 private:
  std::vector<std::shared_ptr<const Plan>> plans_;
};

// Plans every entry (make_plan, or make_rank_plan for `rank`) with `options`, each as it would be planned alone.
// Errors name the entry. For tensors that change every call (options.buffers_change) each member pays its own
// mapping or staging: fresh tensors are allocations of their own, each opened by every peer that reads it. Under
// transport auto a member that would stage runs on NCCL instead (a batch step stages every source before any peer
// reads one).
PlanBatch make_plan_batch(std::span<const BatchEntry> entries, const PlanOptions& options = {},
                          std::optional<int> rank = std::nullopt);

// A batch as JSON: {"schema": "reshard.batch/1", "plans": [plan, ...]}, each plan as plan_to_json writes it
// (docs/plan-json.md). batch_from_json validates every plan as plan_from_json does (errors name the tensor), then the
// batch as the constructor does; the text round-trips exactly.
std::string batch_to_json(const PlanBatch& batch);
PlanBatch batch_from_json(const std::string& text);

// Lowers one rank's part of the batch (a batch of one: lower(plan)). See the header comment for the merge.
RankProgram lower(const PlanBatch& batch, int rank, const LowerOptions& options = {});

// One memory budget for a whole set of tensors (a weight sync): the batch's tensors, in order, cut into consecutive
// groups, each run as a batch of its own one after another. Each group is as long as it can be while its program,
// lowered with `options`, needs at most `budget` bytes of workspace on every rank of the world; so the staging memory
// of the whole set is bounded by the budget, not by the budget times the number of tensors. Without a budget: one
// group of every tensor. The plans must be global (every rank decides the same groups from them); kInvalidArgument,
// naming the tensor, when one tensor alone needs more than the budget. held[t] (empty: none): bytes per rank that
// tensor t holds besides the workspace while its group runs (a caller's staging, as move_state_dict's conversion
// routes take), counted with the group's workspace.
std::vector<std::vector<size_t>> budget_groups(const PlanBatch& batch, std::optional<Index> budget,
                                               const LowerOptions& options = {}, std::span<const Index> held = {});

// The batch of the tensors at `members` of `batch` (in that order).
PlanBatch sub_batch(const PlanBatch& batch, std::span<const size_t> members);

}  // namespace reshard
