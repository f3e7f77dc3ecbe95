// Reading JSON documents that come from files (plans, profiles): a nesting limit enforced while parsing, before any
// recursive walk, copy or dump can see the document, and integer fields that never wrap.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "reshard/checked_math.hpp"
#include "reshard/plan.hpp"

namespace reshard::detail {

// Deepest nesting of arrays and objects a plan or profile may use (theirs is at most 5).
inline constexpr int kMaxJsonDepth = 64;

// A top-level member that must be an array of at most `max_elements` (a plan's "steps"): checked in a first pass that
// builds nothing, so a document claiming millions is refused before millions of values are allocated.
struct JsonArrayLimit {
  std::string_view key;
  size_t max_elements = 0;
};

// The transfers of a plan's steps (steps[i].transfers[k]) read straight from the text, with no JSON value each: an
// element that is an object of exactly the members src, dst, bytes (integers) and global_offset, shape (arrays of at
// most kMaxDims integers), every integer within int64, is read here and stands as null in the document; any other
// element stays in the document as it is, for the caller to read member by member and refuse naming the member.
struct PlanTransfersRead {
  struct Step {
    std::vector<Transfer> transfers;  // one per element of the step's transfers array, in order
    std::vector<char> read;           // whether that element was read here (else: the document's element)
  };
  std::vector<Step> steps;  // by step index; a step without a transfers array has none
};

// Parses `text` for `what` ("plan", "profile"), the limits checked first. kParse "<what> is not
// valid JSON: ..." for bad syntax and numbers beyond double's range, "<what> nests arrays or objects deeper than 64
// levels" past the limit; kInvalidArgument "<what> has more than M <key>; at most M are loaded" past `limit`. With
// `transfers`, a plan's transfers are read into it as described there.
nlohmann::ordered_json parse_json_input(const std::string& text, std::string_view what,
                                        std::optional<JsonArrayLimit> limit = std::nullopt,
                                        PlanTransfersRead* transfers = nullptr);

// A JSON integer as int64: nullopt when `v` is not an integer; kInvalidArgument "<field> value N does not fit in 64
// bits" for integers (or integral floats such as 1e30) outside int64.
std::optional<Index> json_int64(const nlohmann::ordered_json& v, const std::string& field);

}  // namespace reshard::detail
