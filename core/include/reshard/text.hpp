// Small text helpers shared by the parsers: splitting on a separator, whole-number parsing, reading a file.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace reshard {

// "2x4x8" split on 'x' -> {"2", "4", "8"}; empty parts are kept ("4x" -> {"4", ""}).
std::vector<std::string_view> split(std::string_view text, char sep);

// The whole text as a base-10 integer; nullopt when it is empty, not a number, or does not fit in 64 bits
// (`overflow` then set).
std::optional<long long> parse_integer(std::string_view text, bool* overflow = nullptr);

// The file's contents; kInvalidArgument "cannot read <what> file '<path>'" when it cannot be opened.
std::string read_text_file(const std::string& path, std::string_view what);

}  // namespace reshard
