// Text helpers of the tools: echoing input safely, and byte counts with binary suffixes.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "reshard/checked_math.hpp"

namespace reshard::tools {

// The text with control characters escaped (\n, \t, \r, \e, \xNN; also DEL), so that echoing an input never moves
// the cursor or changes the terminal's colours. (A local helper until core/ has one.)
std::string printable(std::string_view text);

// "1048576", "64MiB", "2GiB", "512KiB", "8B": bytes; nullopt when not a whole number >= 0 or too large for 64 bits
// (`error` then says which).
enum class ByteCountError { kNone, kEmpty, kNotANumber, kNegative, kTooLarge };
std::optional<Index> parse_byte_count(std::string_view text, ByteCountError* error = nullptr);

}  // namespace reshard::tools
