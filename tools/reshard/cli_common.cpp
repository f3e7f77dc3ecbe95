#include "cli_common.hpp"

#include <limits>

#include "reshard/text.hpp"

namespace reshard::cli {

void add_tensor_flags(CLI::App& cmd, TensorFlags& flags) {
  cmd.add_option("--mesh", flags.mesh, "Mesh shape, e.g. 2x4")->required();
  cmd.add_option("--shape", flags.shape, "Global tensor shape, e.g. 8192x8192")->required();
  cmd.add_option("--ranks", flags.ranks, "Explicit rank at each row-major mesh coordinate, e.g. 3,2,1,0");
}

Mesh make_mesh(const TensorFlags& flags) {
  std::vector<int> shape = parse_mesh_shape(flags.mesh);
  if (flags.ranks.empty()) return Mesh(shape);
  std::vector<int> ranks;
  for (std::string_view part : split(flags.ranks, ',')) {
    std::optional<long long> v = parse_integer(part);
    if (!v || *v < 0 || *v > std::numeric_limits<int>::max())
      fail(ErrorKind::kParse, cat("--ranks '", flags.ranks, "': '", part, "' is not a rank number"));
    ranks.push_back(static_cast<int>(*v));
  }
  return Mesh(shape, ranks);
}

Layout make_layout(const TensorFlags& flags, const std::string& placements) {
  return Layout(make_mesh(flags), parse_placements(placements), parse_shape(flags.shape));
}

Index parse_bytes(const std::string& flag, const std::string& text) {
  static const std::pair<const char*, Index> kSuffixes[] = {
      {"GiB", Index(1) << 30}, {"MiB", Index(1) << 20}, {"KiB", Index(1) << 10}, {"B", 1}};
  std::string_view digits = text;
  Index scale = 1;
  for (auto [suffix, factor] : kSuffixes) {
    std::string_view sv(suffix);
    if (digits.size() > sv.size() && digits.substr(digits.size() - sv.size()) == sv) {
      digits.remove_suffix(sv.size());
      scale = factor;
      break;
    }
  }
  std::optional<long long> parsed = parse_integer(digits);
  if (!parsed) fail(ErrorKind::kParse, cat(flag, " '", text, "' is not a byte count (e.g. 1048576, 64MiB)"));
  long long v = *parsed;
  if (v < 0) fail(ErrorKind::kInvalidArgument, cat(flag, " must be >= 0 bytes, got ", text));
  return checked_mul(v, scale, flag);
}

}  // namespace reshard::cli
