// Text helpers of the tools: byte counts with binary suffixes (core's parse_byte_count, text.hpp).
#pragma once

#include "reshard/text.hpp"

namespace reshard::tools {

using reshard::ByteCountError;
using reshard::parse_byte_count;

}  // namespace reshard::tools
