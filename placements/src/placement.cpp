#include "reshard/placement.hpp"

#include <limits>
#include <optional>

#include "reshard/error.hpp"
#include "reshard/text.hpp"

namespace reshard {
namespace {

constexpr std::string_view kForms = "expected R, S<d>, S(<d>), P, P(sum), P(avg), P(max) or P(min)";

bool parse_int(std::string_view s, int& out) {
  std::optional<long long> v = parse_integer(s);
  if (!v || *v < std::numeric_limits<int>::min() || *v > std::numeric_limits<int>::max()) return false;
  out = static_cast<int>(*v);
  return true;
}

// "X(inner)" -> inner, when text starts with `head` followed by parentheses.
bool strip_call(std::string_view text, std::string_view head, std::string_view& inner) {
  if (text.size() < head.size() + 2 || text.substr(0, head.size()) != head) return false;
  std::string_view rest = text.substr(head.size());
  if (rest.front() != '(' || rest.back() != ')') return false;
  inner = rest.substr(1, rest.size() - 2);
  return true;
}

ReduceOp parse_op(std::string_view original, std::string_view op) {
  if (op.empty() || op == "sum" || op == "\"sum\"" || op == "'sum'") return ReduceOp::kSum;
  if (op == "avg" || op == "\"avg\"" || op == "'avg'") return ReduceOp::kAvg;
  if (op == "max" || op == "\"max\"" || op == "'max'") return ReduceOp::kMax;
  if (op == "min" || op == "\"min\"" || op == "'min'") return ReduceOp::kMin;
  fail(ErrorKind::kParse, cat("placement '", printable(original), "': unknown reduce op '", printable(op),
                              "'; expected sum, avg, max or min"));
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string_view to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAvg:
      return "avg";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
  }
  return "?";
}

std::string to_string(const Placement& p) {
  switch (p.kind()) {
    case Placement::Kind::kReplicate:
      return "R";
    case Placement::Kind::kShard: {
      std::string s = "S";
      s += std::to_string(p.dim());
      return s;
    }
    case Placement::Kind::kPartial: {
      if (p.op() == ReduceOp::kSum) return "P";
      std::string s = "P(";
      s += to_string(p.op());
      s += ')';
      return s;
    }
  }
  return "?";
}

std::string to_string(const std::vector<Placement>& ps) {
  std::string s;
  for (size_t i = 0; i < ps.size(); ++i) {
    if (i) s += ',';
    s += to_string(ps[i]);
  }
  return s;
}

Placement parse_placement(std::string_view raw) {
  std::string_view text = trim(raw);
  std::string_view inner;
  int dim = 0;
  if (text == "R" || text == "Replicate()" || text == "Replicate") return Placement::replicate();
  if (text == "P" || text == "Partial()" || text == "Partial") return Placement::partial(ReduceOp::kSum);
  if (strip_call(text, "P", inner) || strip_call(text, "Partial", inner))
    return Placement::partial(parse_op(raw, trim(inner)));
  if (strip_call(text, "S", inner) || strip_call(text, "Shard", inner)) {
    if (!parse_int(trim(inner), dim))
      fail(ErrorKind::kParse,
           cat("placement '", printable(raw), "': shard dim '", printable(inner), "' is not an integer"));
    return Placement::shard(dim);
  }
  if (text.size() >= 2 && text.front() == 'S') {
    if (!parse_int(text.substr(1), dim))
      fail(ErrorKind::kParse,
           cat("placement '", printable(raw), "': shard dim '", printable(text.substr(1)), "' is not an integer"));
    return Placement::shard(dim);
  }
  fail(ErrorKind::kParse, cat("unknown placement '", printable(raw), "'; ", kForms));
}

std::vector<Placement> parse_placements(std::string_view text) {
  std::vector<Placement> out;
  if (trim(text).empty()) fail(ErrorKind::kParse, cat("placements: empty value; ", kForms, ", comma-separated"));
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    char c = i < text.size() ? text[i] : ',';
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      std::string_view part = text.substr(start, i - start);
      if (trim(part).empty())
        fail(ErrorKind::kParse, cat("placements '", printable(text), "': empty entry at position ", out.size()));
      out.push_back(parse_placement(part));
      start = i + 1;
    }
  }
  if (depth != 0) fail(ErrorKind::kParse, cat("placements '", printable(text), "': unbalanced parentheses"));
  return out;
}

Placement normalize(const Placement& p, int tensor_ndim) {
  if (!p.is_shard()) return p;
  int d = p.dim();
  if (d < -tensor_ndim || d >= tensor_ndim)
    fail(ErrorKind::kInvalidArgument, cat("shard dim ", d, " is out of range for a ", tensor_ndim,
                                          "-D tensor (expected ", -tensor_ndim, "..", tensor_ndim - 1, ")"));
  return Placement::shard(d < 0 ? d + tensor_ndim : d);
}

}  // namespace reshard
