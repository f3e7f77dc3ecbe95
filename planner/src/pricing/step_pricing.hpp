// Prices and workspace of single steps under the cost model (internal to the planner).
//
// Every figure comes from the step geometry (step_geometry.hpp) that the lowering lays out, so candidates are priced
// with their true peak workspace without lowering every rank (tests/planner/lowering_test.cpp keeps checking that they
// agree).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "pricing/step_geometry.hpp"
#include "pricing/transfer_classes.hpp"
#include "reshard/cost_model.hpp"
#include "reshard/overlap.hpp"
#include "reshard/plan.hpp"
#include "reshard/rank_boxes.hpp"

namespace reshard::detail {

// How an all_reduce step runs: every form the pricer may offer priced with the cheapest kept, or as given (a loaded
// plan's Step::hierarchical, with Step::mixed for one-sided node stages).
enum class AllReduceForm { kCheaper, kFlat, kHierarchical, kHierarchicalOneSided };

struct StepPrice {
  double us = 0;
  Index bytes_moved = 0;
  bool hierarchical = false;    // an all_reduce priced, and cheaper, as Step::hierarchical
  bool node_one_sided = false;  // ... with its node stages one-sided (Step::mixed)
};

// A step together with every rank's scratch (elements) as the lowering allocates it.
struct PricedStep {
  Step step;
  std::vector<Index> scratch;  // empty until computed (collective steps found by searches)
  std::string unavailable;     // set when the step cannot run (an nvlink step with transfers across nodes)
  int peer_reads = 0;          // one-sided steps: (rank, peer it reads from) pairs, summed over the ranks
};

class StepPricer {
 public:
  // `reference`: price p2p steps transfer by transfer (the reference the tests compare the class pricing with).
  StepPricer(const CostModel& model, DType dtype, Index chunk_bytes, Fusion fusion = Fusion::kAuto,
             bool reference = false)
      : model_(model),
        dtype_(dtype),
        es_(reshard::element_size(dtype)),
        chunk_bytes_(chunk_bytes),
        fusion_(fusion),
        reference_(reference) {}

  const CostModel& model() const { return model_; }
  DType dtype() const { return dtype_; }
  int element_size() const { return es_; }
  Index chunk_bytes() const { return chunk_bytes_; }
  Fusion fusion() const { return fusion_; }
  bool reference() const { return reference_; }
  // Whether an all_reduce's cheapest form may run its node stages one-sided (Step::hierarchical with Step::mixed):
  // where the planner may mix transports (transport auto, peer access). Off by default.
  void offer_one_sided_node_stages(bool offer) { one_sided_node_stages_ = offer; }
  // For callers whose tensors change every call (PlanOptions::buffers_change): one-sided node stages also cost
  // mapping the node members' new tensors on every call (hierarchical_all_reduce). Off by default.
  void price_changing_buffers(bool changing) { changing_buffers_ = changing; }

  // A collective or local step from a to b on `dims`. Wire time from the largest member; packing and unpacking
  // from representative ranks (the first, the last and the one with the largest tensor). An all_reduce takes `form`:
  // the cheaper of flat and hierarchical (StepPrice::hierarchical says which), or the one given (kInvalidArgument
  // naming the step's dims where a hierarchical one cannot run).
  StepPrice collective(const RankBoxes& a, const RankBoxes& b, StepKind kind, std::span<const int> dims,
                       AllReduceForm form = AllReduceForm::kCheaper) const;
  // The same without the fixed per-step overhead.
  StepPrice collective_wire(const RankBoxes& a, const RankBoxes& b, StepKind kind, std::span<const int> dims,
                            AllReduceForm form = AllReduceForm::kCheaper) const;
  // A floor of collective(a, b, kind, dims).us for every b (read off the source boxes only, without checking that the
  // step is valid): what a search may compare against its best so far before building b and pricing the step. All
  // gathers: the wire time of the largest member (packing and unpacking add to it); all_reduce: its price; other
  // communication steps: the fixed per-step overhead; local steps: -infinity (no floor).
  double collective_floor(const RankBoxes& a, StepKind kind, std::span<const int> dims) const;
  // An all_reduce over groups that span nodes with several members on each, as Step::hierarchical runs it
  // (node_split.hpp), its node stages on `node_stages` (nccl collectives, or nvlink: one-sided, Step::mixed): unset
  // where it cannot run so (no split, pieces of unequal size, an integer average).
  std::optional<StepPrice> hierarchical_all_reduce(const RankBoxes& a, std::span<const int> dims,
                                                   Transport node_stages = Transport::kNccl) const;
  // The cheaper of the hierarchical forms this pricer offers (NCCL node stages; one-sided ones where offered).
  std::optional<StepPrice> cheapest_hierarchical(const RankBoxes& a, std::span<const int> dims) const;
  // Every rank's scratch for a collective or local step (computed once per class of alike ranks).
  std::vector<Index> collective_scratch(const RankBoxes& a, const RankBoxes& b, StepKind kind,
                                        std::span<const int> dims) const;

  // A p2p step on `transport`: every rank's exchange, pricing the slowest rank and sizing every rank's scratch. The
  // step holds no transfers (the planner materialises them for the plan it keeps). An nvlink step with a transfer
  // across nodes returns at the first one (in destination rank order) with `unavailable` set and no figures.
  // Exchanges come from transfer classes (transfer_classes.hpp) where they apply, else from every transfer; both
  // give the same figures (tests/planner/planner_equivalence_test.cpp).
  PricedStep p2p(const OverlapIndex& index, Transport transport = Transport::kNccl) const;

  // The exchange rules of this pricer's steps (transport, element size, chunking, copy-engine rule).
  ExchangeRules exchange_rules(Transport transport, bool reduces) const;
  // A p2p step from `a`'s placements to `b`'s on `transport`, before pricing.
  static PricedStep p2p_step(const RankBoxes& a, const RankBoxes& b, Transport transport);
  // A p2p step's figures from every rank's exchange (ps.step.bytes_moved filled in): its scratch per rank, its time
  // (the slowest rank plus the step's overhead) and, for one-sided steps, whether it runs fused (one kernel per rank).
  void finish_p2p(const std::vector<RankExchange>& ranks, const ExchangeRules& rules, PricedStep& ps) const;
  // Why an nvlink step cannot carry a transfer between nodes.
  static std::string cross_node_reason(const Transfer& t);
  // For callers whose tensors change every call (PlanOptions::buffers_change), a plan's first step when it is an
  // nvlink step that moves data (it reads the caller's source tensor; `a` its source boxes): staged (Step::staged;
  // every rank's scratch holds a copy of its source tensor, staged_source_elements, and the step costs that local
  // copy more) or not (the step costs mapping the peers' new tensors more: Profile::nvlink.map_us per (rank, peer
  // it reads) pair, PricedStep::peer_reads). `staged`: as a loaded plan
  // says; unset: the cheaper. A step that mixes transports (Step::mixed) costs mapping its one-sided parts' peers'
  // tensors (PricedStep::peer_reads of them; never staged); a hierarchical all_reduce's one-sided node stages pay
  // theirs in their price (price_changing_buffers). Other steps are left as they are.
  void price_source_reads(PricedStep& ps, const RankBoxes& a, std::optional<bool> staged = std::nullopt) const;

 private:
  // Fill every rank's exchange and the step's bytes; false (with ps.unavailable set) when the step cannot run.
  bool exchanges_by_transfer(const OverlapIndex& index, const ExchangeRules& rules, std::vector<RankExchange>& ranks,
                             PricedStep& ps) const;
  bool exchanges_by_class(const OverlapIndex& index, const ExchangeRules& rules, std::vector<RankExchange>& ranks,
                          PricedStep& ps) const;
  Index rank_collective_scratch(const RankBoxes& a, const RankBoxes& b, StepKind kind, std::span<const int> dims,
                                int rank) const;

  const CostModel& model_;
  DType dtype_;
  int es_;
  Index chunk_bytes_;
  Fusion fusion_;
  bool reference_;
  bool one_sided_node_stages_ = false;
  bool changing_buffers_ = false;
  // collective_scratch()'s tables.
  struct ScratchTables {
    std::vector<Index> signature_of, signatures, signature_start, keys, key, class_scratch;
    std::vector<std::uint64_t> class_hash;
    std::vector<int> slot_class;
  };
  // exchanges_by_class()'s classes of one rank, with how many of each class's transfers stay on the node: the
  // receiving rank's, and the sending ranks' of the node.
  struct RankClasses {
    std::vector<TransferClass> classes;
    std::vector<Index> near;
  };
  struct ClassTables {
    TransferClasses::Tables classes;  // the step's per-dim class tables
    RankClasses in;
    std::vector<RankClasses> out;
  };
  // The pricer's working memory, kept to reuse: from step to step, and from planning to planning (a pricer takes it
  // from a small per-thread pool and gives it back when destroyed: a planning's pricer no longer allocates its
  // tables anew).
  struct Scratch {
    std::vector<RankExchange> ranks;         // p2p(): every rank's exchange
    RankExchange exchange{ExchangeRules{}};  // one all_to_all rank's exchange
    ScratchTables tables;
    ClassTables class_tables;
  };
  struct GiveBack {
    void operator()(Scratch* s) const noexcept;
  };
  struct Pool;  // this thread's kept Scratch
  static Pool& pool();
  static Scratch* take_scratch();
  std::unique_ptr<Scratch, GiveBack> scratch_{take_scratch()};
};

// Prices a p2p step from every one of its transfers (`all`: a step between meshes, cross_mesh_transfers.hpp, or a
// relayed one, relays.hpp), as StepPricer::p2p prices a same-mesh one. A relayed step runs in two phases, each priced
// as a step of its own (the slowest rank and the overhead): the direct transfers, then the relayed ones, sent by their
// relay out of its b tensor; each rank's scratch is the larger of its two (the phases run one after the other).
// `mixed` (Step::mixed, transport nccl): the transfers within a node are priced as an nvlink step's (not fused), those
// between nodes as an nccl step's, and the phase takes the longer of the two (they run concurrently); a relayed
// phase is one-sided then; PricedStep::peer_reads counts the one-sided parts' (rank, peer) pairs.
PricedStep price_listed_p2p(const StepPricer& pricer, const RankBoxes& a, const RankBoxes& b,
                            const std::vector<Transfer>& all, Transport transport, bool reduces, bool mixed = false);

}  // namespace reshard::detail
