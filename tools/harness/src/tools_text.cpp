#include "reshard/tools_text.hpp"

#include "reshard/text.hpp"

namespace reshard::tools {

std::optional<Index> parse_byte_count(std::string_view text, ByteCountError* error) {
  static const std::pair<const char*, Index> kSuffixes[] = {
      {"GiB", Index(1) << 30}, {"MiB", Index(1) << 20}, {"KiB", Index(1) << 10}, {"B", 1}};
  auto failed = [&](ByteCountError e) -> std::optional<Index> {
    if (error) *error = e;
    return std::nullopt;
  };
  if (text.empty()) return failed(ByteCountError::kEmpty);
  Index scale = 1;
  for (auto [suffix, factor] : kSuffixes) {
    std::string_view sv(suffix);
    if (text.size() > sv.size() && text.substr(text.size() - sv.size()) == sv) {
      text.remove_suffix(sv.size());
      scale = factor;
      break;
    }
  }
  bool overflow = false;
  std::optional<long long> v = parse_integer(text, &overflow);
  if (overflow) return failed(ByteCountError::kTooLarge);
  if (!v) return failed(ByteCountError::kNotANumber);
  if (*v < 0) return failed(ByteCountError::kNegative);
  Index out = 0;
  if (__builtin_mul_overflow(*v, scale, &out)) return failed(ByteCountError::kTooLarge);
  if (error) *error = ByteCountError::kNone;
  return out;
}

}  // namespace reshard::tools
