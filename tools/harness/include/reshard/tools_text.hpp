// Text helpers of the tools: byte counts with binary suffixes (echoing input safely is core's printable, text.hpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "reshard/checked_math.hpp"

namespace reshard::tools {

// "1048576", "64MiB", "2GiB", "512KiB", "8B": bytes; nullopt when not a whole number >= 0 or too large for 64 bits
// (`error` then says which).
enum class ByteCountError { kNone, kEmpty, kNotANumber, kNegative, kTooLarge };
std::optional<Index> parse_byte_count(std::string_view text, ByteCountError* error = nullptr);

}  // namespace reshard::tools
