// Prices and workspace of single steps under the cost model (internal to the planner).
//
// Every figure comes from the step geometry (step_geometry.hpp) that the lowering lays out, so candidates are priced
// with their true peak workspace without lowering every rank (tests/lowering_test.cpp keeps checking that they agree).
#pragma once

#include <optional>
#include <span>
#include <string>

#include "reshard/cost_model.hpp"
#include "reshard/overlap.hpp"
#include "reshard/plan.hpp"
#include "reshard/rank_boxes.hpp"
#include "step_geometry.hpp"

namespace reshard::detail {

struct StepPrice {
  double us = 0;
  Index bytes_moved = 0;
};

// A step together with every rank's scratch (elements) as the lowering allocates it.
struct PricedStep {
  Step step;
  std::vector<Index> scratch;  // empty until computed (collective steps found by searches)
  std::string unavailable;     // set when the step cannot run (an nvlink step with transfers across nodes)
};

class StepPricer {
 public:
  StepPricer(const CostModel& model, DType dtype, Index chunk_bytes, Fusion fusion = Fusion::kAuto)
      : model_(model), dtype_(dtype), es_(reshard::element_size(dtype)), chunk_bytes_(chunk_bytes), fusion_(fusion) {}

  const CostModel& model() const { return model_; }
  DType dtype() const { return dtype_; }
  int element_size() const { return es_; }
  Index chunk_bytes() const { return chunk_bytes_; }
  Fusion fusion() const { return fusion_; }

  // A collective or local step from a to b on `dims`. Wire time from the largest member; packing and unpacking
  // from representative ranks (the first, the last and the one with the largest tensor).
  StepPrice collective(const RankBoxes& a, const RankBoxes& b, StepKind kind, std::span<const int> dims) const;
  // The same without the fixed per-step overhead.
  StepPrice collective_wire(const RankBoxes& a, const RankBoxes& b, StepKind kind, std::span<const int> dims) const;
  // Every rank's scratch for a collective or local step.
  std::vector<Index> collective_scratch(const RankBoxes& a, const RankBoxes& b, StepKind kind,
                                        std::span<const int> dims) const;

  // A p2p step on `transport`: streams every transfer once, pricing the slowest rank and sizing every rank's scratch.
  // The step holds no transfers (the planner materialises them for the plan it keeps). An nvlink step with a
  // transfer across nodes returns at that transfer with `unavailable` set and no figures.
  PricedStep p2p(const OverlapIndex& index, Transport transport = Transport::kNccl) const;

  // The exchange rules of this pricer's steps (transport, element size, chunking, copy-engine rule).
  ExchangeRules exchange_rules(Transport transport, bool reduces) const;

 private:
  const CostModel& model_;
  DType dtype_;
  int es_;
  Index chunk_bytes_;
  Fusion fusion_;
};

}  // namespace reshard::detail
