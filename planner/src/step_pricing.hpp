// Prices and workspace of single steps under the cost model (internal to the planner).
//
// Scratch sizes are computed the way lower_steps() allocates them (tests/planner_test.cpp checks that the two
// agree on every rank), so candidates are priced with their true peak workspace without lowering every rank.
#pragma once

#include <optional>
#include <span>

#include "chunking.hpp"
#include "reshard/cost_model.hpp"
#include "reshard/overlap.hpp"
#include "reshard/plan.hpp"
#include "reshard/rank_boxes.hpp"

namespace reshard::detail {

struct StepPrice {
  double us = 0;
  Index bytes_moved = 0;
};

// A step together with every rank's scratch (elements) as the lowering allocates it.
struct PricedStep {
  Step step;
  std::vector<Index> scratch;  // empty until computed (collective steps found by searches)
};

// Which transfers a priced p2p step keeps: none (pricing only), all, or those one rank sends or receives.
struct TransferFilter {
  enum class Mode { kNone, kAll, kRank } mode = Mode::kNone;
  int rank = 0;
  static TransferFilter none() { return {}; }
  static TransferFilter all() { return {Mode::kAll, 0}; }
  static TransferFilter of_rank(int r) { return {Mode::kRank, r}; }
  bool keeps(const Transfer& t) const {
    return mode == Mode::kAll || (mode == Mode::kRank && (t.src == rank || t.dst == rank));
  }
};

class StepPricer {
 public:
  StepPricer(const CostModel& model, DType dtype, Index chunk_bytes)
      : model_(model), dtype_(dtype), es_(reshard::element_size(dtype)), chunk_bytes_(chunk_bytes) {}

  const CostModel& model() const { return model_; }
  DType dtype() const { return dtype_; }
  int element_size() const { return es_; }
  Index chunk_bytes() const { return chunk_bytes_; }

  // A collective or local step from a to b on `dims`. Wire time from the largest member; packing and unpacking
  // from representative ranks (the first, the last and the one with the largest tensor).
  StepPrice collective(const RankBoxes& a, const RankBoxes& b, StepKind kind, std::span<const int> dims) const;
  // The same without the fixed per-step overhead.
  StepPrice collective_wire(const RankBoxes& a, const RankBoxes& b, StepKind kind, std::span<const int> dims) const;
  // Every rank's scratch for a collective or local step.
  std::vector<Index> collective_scratch(const RankBoxes& a, const RankBoxes& b, StepKind kind,
                                        std::span<const int> dims) const;

  // A p2p step: streams every transfer once, pricing the slowest rank and sizing every rank's scratch.
  PricedStep p2p(const OverlapIndex& index, const TransferFilter& keep) const;

 private:
  const CostModel& model_;
  DType dtype_;
  int es_;
  Index chunk_bytes_;
};

}  // namespace reshard::detail
