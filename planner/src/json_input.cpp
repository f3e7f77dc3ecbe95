#include "json_input.hpp"

#include <cmath>
#include <limits>

#include "reshard/text.hpp"

namespace reshard::detail {

using json = nlohmann::ordered_json;

json parse_json_input(const std::string& text, std::string_view what) {
  // The callback sees every value with its depth as it is parsed (nlohmann's parser itself is iterative), so a
  // deeply nested document stops here, before anything recursive runs on it.
  json::parser_callback_t limit = [&](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth)
      fail(ErrorKind::kParse, cat(what, " nests arrays or objects deeper than ", kMaxJsonDepth, " levels"));
    return true;
  };
  try {
    return json::parse(text, limit);
  } catch (const json::exception& e) {  // syntax errors, and numbers out of range ("1e999")
    fail(ErrorKind::kParse, cat(what, " is not valid JSON: ", printable(e.what())));
  }
}

std::optional<Index> json_int64(const json& v, const std::string& field) {
  const auto too_large = [&] {
    fail(ErrorKind::kInvalidArgument, cat(field, " value ", v.dump(), " does not fit in 64 bits"));
  };
  if (v.is_number_unsigned()) {
    if (v.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<Index>::max())) too_large();
    return static_cast<Index>(v.get<std::uint64_t>());
  }
  if (v.is_number_integer()) return v.get<Index>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::abs(d) >= 9.2233720368547758e18) too_large();
  }
  return std::nullopt;
}

}  // namespace reshard::detail
