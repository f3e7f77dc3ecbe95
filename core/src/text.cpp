#include "reshard/text.hpp"

#include <charconv>
#include <fstream>
#include <sstream>

#include "reshard/error.hpp"

namespace reshard {

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  size_t pos = 0;
  while (true) {
    size_t end = text.find(sep, pos);
    parts.push_back(text.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos));
    if (end == std::string_view::npos) return parts;
    pos = end + 1;
  }
}

std::optional<long long> parse_integer(std::string_view text, bool* overflow) {
  long long v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (overflow) *overflow = ec == std::errc::result_out_of_range;
  if (text.empty() || ec != std::errc() || p != text.data() + text.size()) return std::nullopt;
  return v;
}

std::string read_text_file(const std::string& path, std::string_view what) {
  std::ifstream in(path);
  if (!in) fail(ErrorKind::kInvalidArgument, cat("cannot read ", what, " file '", path, "'"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace reshard
