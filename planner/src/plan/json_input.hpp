// Reading JSON documents that come from files (plans, profiles): a nesting limit enforced while parsing, before any
// recursive walk, copy or dump can see the document, and integer fields that never wrap.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "reshard/checked_math.hpp"

namespace reshard::detail {

// Deepest nesting of arrays and objects a plan or profile may use (theirs is at most 5).
inline constexpr int kMaxJsonDepth = 64;

// A top-level member that must be an array of at most `max_elements` (a plan's "steps"): checked in a first pass that
// builds nothing, so a document claiming millions is refused before millions of values are allocated.
struct JsonArrayLimit {
  std::string_view key;
  size_t max_elements = 0;
};

// Parses `text` for `what` ("plan", "profile"). kParse "<what> is not valid JSON: ..." for bad syntax and numbers
// beyond double's range, "<what> nests arrays or objects deeper than 64 levels" past the limit; kInvalidArgument
// "<what> has N <key>; at most M" past `limit`.
nlohmann::ordered_json parse_json_input(const std::string& text, std::string_view what,
                                        std::optional<JsonArrayLimit> limit = std::nullopt);

// A JSON integer as int64: nullopt when `v` is not an integer; kInvalidArgument "<field> value N does not fit in 64
// bits" for integers (or integral floats such as 1e30) outside int64.
std::optional<Index> json_int64(const nlohmann::ordered_json& v, const std::string& field);

}  // namespace reshard::detail
