// Placement of a tensor along one mesh dim, as torch.distributed.tensor's Replicate / Shard / Partial /
// _StridedShard.
//
// Canonical text: "R", "S<d>" (d may be negative before normalisation: "S-1"), "SS<d>/<split factor>" for
// _StridedShard, "P" for Partial(sum) and "P(avg)", "P(max)", "P(min)". The parser also accepts PyTorch's printed
// forms (repr and str: "Shard(dim=0)", "S(0)", "Replicate()", "Partial(reduce_op='sum')", "Partial(sum)",
// "_StridedShard(dim=0, sf=2)", "_StridedShard(dim=0, split_factor=2)", "_S(0, 2)", ...) and lists of them as
// PyTorch prints tuples and lists: "(Shard(dim=0), Replicate())". docs/api.md lists every accepted form.
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
  static constexpr Placement replicate() { return Placement(Kind::kReplicate, 0, 1, ReduceOp::kSum); }
  static constexpr Placement shard(int dim) { return Placement(Kind::kShard, dim, 1, ReduceOp::kSum); }
  // PyTorch's _StridedShard(dim, split_factor): the mesh dim splits each of `split_factor` torch.chunk pieces of
  // the current extent and a rank holds its chunk of every piece (layout.hpp). A split factor of 1 is Shard(dim).
  static constexpr Placement strided_shard(int dim, int split_factor) {
    return Placement(Kind::kShard, dim, split_factor, ReduceOp::kSum);
  }
  static constexpr Placement partial(ReduceOp op = ReduceOp::kSum) { return Placement(Kind::kPartial, 0, 1, op); }

  constexpr Kind kind() const { return kind_; }
  constexpr bool is_replicate() const { return kind_ == Kind::kReplicate; }
  // Shard and _StridedShard.
  constexpr bool is_shard() const { return kind_ == Kind::kShard; }
  constexpr bool is_shard(int dim) const { return kind_ == Kind::kShard && dim_ == dim; }
  constexpr bool is_strided() const { return kind_ == Kind::kShard && split_factor_ > 1; }
  constexpr bool is_partial() const { return kind_ == Kind::kPartial; }
  // Tensor dim of a Shard (0 for other kinds).
  constexpr int dim() const { return dim_; }
  // Split factor of a _StridedShard (1 for every other placement).
  constexpr int split_factor() const { return split_factor_; }
  // Reduction of a Partial (kSum for other kinds).
  constexpr ReduceOp op() const { return op_; }

  friend constexpr bool operator==(const Placement& a, const Placement& b) {
    return a.kind_ == b.kind_ && a.dim_ == b.dim_ && a.split_factor_ == b.split_factor_ && a.op_ == b.op_;
  }

 private:
  constexpr Placement(Kind k, int dim, int split_factor, ReduceOp op)
      : kind_(k), dim_(dim), split_factor_(split_factor), op_(op) {}
  Kind kind_ = Kind::kReplicate;
  int dim_ = 0;
  int split_factor_ = 1;
  ReduceOp op_ = ReduceOp::kSum;
};

std::string to_string(const Placement& p);
// "S0,R"
std::string to_string(const std::vector<Placement>& ps);

// Parses one placement; kParse error naming the text and the accepted forms otherwise.
Placement parse_placement(std::string_view text);
// Parses a comma-separated list ("S0,R", "S(0),P(avg)"), optionally in parentheses or brackets as Python prints a
// tuple or list ("(Shard(dim=0), Replicate())", "[S(0), R]", "(Shard(dim=0),)"); commas inside a placement's
// parentheses are not separators.
std::vector<Placement> parse_placements(std::string_view text);

// Resolves a negative shard dim against the tensor rank; kInvalidArgument if out of [-ndim, ndim).
Placement normalize(const Placement& p, int tensor_ndim);

}  // namespace reshard
