#include "reshard/placement.hpp"

#include <cctype>
#include <limits>
#include <optional>

#include "reshard/error.hpp"
#include "reshard/text.hpp"

namespace reshard {
namespace {

constexpr std::string_view kForms =
    "expected R, S<d>, SS<d>/<split factor>, P, P(sum|avg|max|min), or PyTorch's Replicate(), Shard(dim=<d>), "
    "_StridedShard(dim=<d>, split_factor=<f>), Partial(reduce_op='<op>')";

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

bool parse_int(std::string_view s, int& out) {
  std::optional<long long> v = parse_integer(trim(s));
  if (!v || *v < std::numeric_limits<int>::min() || *v > std::numeric_limits<int>::max()) return false;
  out = static_cast<int>(*v);
  return true;
}

std::string_view unquote(std::string_view v) {
  if (v.size() >= 2 && (v.front() == '\'' || v.front() == '"') && v.back() == v.front())
    return v.substr(1, v.size() - 2);
  return v;
}

bool identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// One argument of a call: `key=value` or `value`.
struct Arg {
  std::string_view key, value;
};

// "Name(a, k=b)" -> name "Name", args {a}, {k, b}; no parentheses: the whole text is the name. A qualified name
// ("torch.distributed.tensor.Shard") keeps its last part. False when the text is not of that form.
bool split_call(std::string_view text, std::string_view& name, std::vector<Arg>& args, bool& called) {
  const size_t open = text.find('(');
  called = open != std::string_view::npos;
  name = trim(called ? text.substr(0, open) : text);
  const size_t dot = name.rfind('.');
  if (dot != std::string_view::npos) {
    for (char c : name.substr(0, dot))
      if (!identifier_char(c) && c != '.') return false;
    name = name.substr(dot + 1);
  }
  if (!called) return true;
  if (text.back() != ')') return false;
  std::string_view inner = text.substr(open + 1, text.size() - open - 2);
  if (inner.find_first_of("()") != std::string_view::npos) return false;
  if (trim(inner).empty()) return true;
  for (std::string_view part : split(inner, ',')) {
    part = trim(part);
    if (part.empty()) return false;
    const size_t eq = part.find('=');
    if (eq == std::string_view::npos) {
      args.push_back({{}, unquote(part)});
    } else {
      args.push_back({trim(part.substr(0, eq)), unquote(trim(part.substr(eq + 1)))});
    }
  }
  return true;
}

ReduceOp parse_op(std::string_view original, std::string_view op) {
  if (op.empty() || op == "sum") return ReduceOp::kSum;
  if (op == "avg") return ReduceOp::kAvg;
  if (op == "max") return ReduceOp::kMax;
  if (op == "min") return ReduceOp::kMin;
  fail(ErrorKind::kParse, cat("placement '", printable(original), "': unknown reduce op '", printable(op),
                              "'; expected sum, avg, max or min"));
}

// The call's arguments matched to `names` by position or keyword (a name may have aliases, "split_factor|sf").
// Missing ones stay empty; unknown keywords, repeats and extra arguments are errors.
std::vector<std::string_view> bind(std::string_view original, const std::vector<Arg>& args,
                                   const std::vector<std::vector<std::string_view>>& names) {
  std::vector<std::string_view> out(names.size());
  std::vector<bool> seen(names.size(), false);
  auto set = [&](size_t i, std::string_view v) {
    if (seen[i])
      fail(ErrorKind::kParse, cat("placement '", printable(original), "': '", names[i][0], "' is given twice"));
    seen[i] = true;
    out[i] = trim(v);
  };
  for (size_t a = 0; a < args.size(); ++a) {
    if (args[a].key.empty()) {
      if (a >= names.size())
        fail(ErrorKind::kParse, cat("placement '", printable(original), "': too many arguments; ", kForms));
      set(a, args[a].value);
      continue;
    }
    size_t found = names.size();
    for (size_t i = 0; i < names.size() && found == names.size(); ++i)
      for (std::string_view alias : names[i])
        if (alias == args[a].key) found = i;
    if (found == names.size())
      fail(ErrorKind::kParse,
           cat("placement '", printable(original), "': unknown argument '", printable(args[a].key), "'; ", kForms));
    set(found, args[a].value);
  }
  return out;
}

int shard_dim(std::string_view original, std::string_view text) {
  int dim = 0;
  if (text.empty())
    fail(ErrorKind::kParse, cat("placement '", printable(original), "': the shard dim is missing; ", kForms));
  if (!parse_int(text, dim))
    fail(ErrorKind::kParse,
         cat("placement '", printable(original), "': shard dim '", printable(text), "' is not an integer"));
  return dim;
}

int split_factor(std::string_view original, std::string_view text) {
  int f = 0;
  if (text.empty())
    fail(ErrorKind::kParse, cat("placement '", printable(original), "': the split factor is missing; ", kForms));
  if (!parse_int(text, f) || f < 1)
    fail(ErrorKind::kParse,
         cat("placement '", printable(original), "': split factor '", printable(text), "' is not a whole number >= 1"));
  return f;
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
    case Placement::Kind::kShard:  // without a stream: plans name their routes' placements
      return p.is_strided() ? cat("SS", p.dim(), "/", p.split_factor()) : cat("S", p.dim());
    case Placement::Kind::kPartial:
      return p.op() == ReduceOp::kSum ? std::string("P") : cat("P(", to_string(p.op()), ")");
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
  const std::string_view text = trim(raw);
  // Short forms: S<d>, SS<d>/<f>.
  if (text.size() >= 3 && text.substr(0, 2) == "SS" && text.find('(') == std::string_view::npos) {
    const size_t slash = text.find('/');
    if (slash == std::string_view::npos)
      fail(ErrorKind::kParse, cat("placement '", printable(raw), "': expected SS<d>/<split factor>, e.g. SS0/2"));
    return Placement::strided_shard(shard_dim(raw, text.substr(2, slash - 2)),
                                    split_factor(raw, text.substr(slash + 1)));
  }
  if (text.size() >= 2 && text.front() == 'S' && text[1] != 'S' && text.back() != ')' && text != "Shard")
    return Placement::shard(shard_dim(raw, text.substr(1)));
  std::string_view name;
  std::vector<Arg> args;
  bool called = false;
  if (!split_call(text, name, args, called))
    fail(ErrorKind::kParse, cat("unknown placement '", printable(raw), "'; ", kForms));
  if (name == "R" || name == "Replicate") {
    if (!args.empty()) fail(ErrorKind::kParse, cat("placement '", printable(raw), "': Replicate takes no arguments"));
    return Placement::replicate();
  }
  if (name == "P" || name == "Partial") {
    const auto v = bind(raw, args, {{"reduce_op"}});
    return Placement::partial(parse_op(raw, v[0]));
  }
  if (called && (name == "S" || name == "Shard")) {
    const auto v = bind(raw, args, {{"dim"}});
    return Placement::shard(shard_dim(raw, v[0]));
  }
  if (called && (name == "_StridedShard" || name == "_S" || name == "SS")) {
    const auto v = bind(raw, args, {{"dim"}, {"split_factor", "sf"}});
    return Placement::strided_shard(shard_dim(raw, v[0]), split_factor(raw, v[1]));
  }
  fail(ErrorKind::kParse, cat("unknown placement '", printable(raw), "'; ", kForms));
}

std::vector<Placement> parse_placements(std::string_view raw) {
  std::string_view text = trim(raw);
  if (text.empty()) fail(ErrorKind::kParse, cat("placements: empty value; ", kForms, ", comma-separated"));
  // A Python tuple or list: "(a, b)", "[a, b]", "(a,)".
  if ((text.front() == '(' && text.back() == ')') || (text.front() == '[' && text.back() == ']')) {
    int depth = 0;
    bool encloses = true;  // the opening bracket closes only at the end
    for (size_t i = 0; i < text.size() && encloses; ++i) {
      if (text[i] == '(' || text[i] == '[') ++depth;
      if (text[i] == ')' || text[i] == ']') --depth;
      if (depth == 0 && i + 1 < text.size()) encloses = false;
    }
    if (encloses) {
      text = trim(text.substr(1, text.size() - 2));
      if (!text.empty() && text.back() == ',') text = trim(text.substr(0, text.size() - 1));
      if (text.empty()) fail(ErrorKind::kParse, cat("placements '", printable(raw), "' are empty; ", kForms));
    }
  }
  std::vector<Placement> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    const char c = i < text.size() ? text[i] : ',';
    if (c == '(' || c == '[') ++depth;
    if (c == ')' || c == ']') --depth;
    if (depth < 0) fail(ErrorKind::kParse, cat("placements '", printable(raw), "': unbalanced parentheses"));
    if (c == ',' && depth == 0) {
      std::string_view part = text.substr(start, i - start);
      if (trim(part).empty())
        fail(ErrorKind::kParse, cat("placements '", printable(raw), "': empty entry at position ", out.size()));
      out.push_back(parse_placement(part));
      start = i + 1;
    }
  }
  if (depth != 0) fail(ErrorKind::kParse, cat("placements '", printable(raw), "': unbalanced parentheses"));
  return out;
}

Placement normalize(const Placement& p, int tensor_ndim) {
  if (!p.is_shard()) return p;
  int d = p.dim();
  if (d < -tensor_ndim || d >= tensor_ndim)
    fail(ErrorKind::kInvalidArgument, cat("shard dim ", d, " is out of range for a ", tensor_ndim,
                                          "-D tensor (expected ", -tensor_ndim, "..", tensor_ndim - 1, ")"));
  return Placement::strided_shard(d < 0 ? d + tensor_ndim : d, p.split_factor());
}

}  // namespace reshard
