// Placement of a tensor along one mesh dim, as torch.distributed.tensor's Replicate / Shard / Partial.
//
// Canonical text: "R", "S<d>" (d may be negative before normalisation: "S-1"), "P" for Partial(sum) and
// "P(avg)", "P(max)", "P(min)". The parser also accepts "S(<d>)", "P(sum)" and PyTorch's spellings
// "Replicate()", "Shard(d)", "Partial()", "Partial(op)".
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace reshard {

enum class ReduceOp { kSum, kAvg, kMax, kMin };

std::string_view to_string(ReduceOp op);

class Placement {
 public:
  enum class Kind { kReplicate, kShard, kPartial };

  constexpr Placement() = default;  // Replicate
  static constexpr Placement replicate() { return Placement(Kind::kReplicate, 0, ReduceOp::kSum); }
  static constexpr Placement shard(int dim) { return Placement(Kind::kShard, dim, ReduceOp::kSum); }
  static constexpr Placement partial(ReduceOp op = ReduceOp::kSum) { return Placement(Kind::kPartial, 0, op); }

  constexpr Kind kind() const { return kind_; }
  constexpr bool is_replicate() const { return kind_ == Kind::kReplicate; }
  constexpr bool is_shard() const { return kind_ == Kind::kShard; }
  constexpr bool is_shard(int dim) const { return kind_ == Kind::kShard && dim_ == dim; }
  constexpr bool is_partial() const { return kind_ == Kind::kPartial; }
  // Tensor dim of a Shard (0 for other kinds).
  constexpr int dim() const { return dim_; }
  // Reduction of a Partial (kSum for other kinds).
  constexpr ReduceOp op() const { return op_; }

  friend constexpr bool operator==(const Placement& a, const Placement& b) {
    return a.kind_ == b.kind_ && a.dim_ == b.dim_ && a.op_ == b.op_;
  }

 private:
  constexpr Placement(Kind k, int dim, ReduceOp op) : kind_(k), dim_(dim), op_(op) {}
  Kind kind_ = Kind::kReplicate;
  int dim_ = 0;
  ReduceOp op_ = ReduceOp::kSum;
};

std::string to_string(const Placement& p);
// "S0,R"
std::string to_string(const std::vector<Placement>& ps);

// Parses one placement; kParse error naming the text and the accepted forms otherwise.
Placement parse_placement(std::string_view text);
// Parses a comma-separated list ("S0,R", "S(0),P(avg)"); commas inside parentheses are not separators.
std::vector<Placement> parse_placements(std::string_view text);

// Resolves a negative shard dim against the tensor rank; kInvalidArgument if out of [-ndim, ndim).
Placement normalize(const Placement& p, int tensor_ndim);

}  // namespace reshard
