// Small text helpers shared by the parsers: splitting on a separator, whole-number and byte-count parsing, reading a
// file, and making echoed input safe to print.
#pragma once

#include <cstdint>
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

// The whole text as a base-10 integer, or a kParse error naming `what` and the text: "<what>: empty value",
// "<what> '<text>' does not fit in 64 bits", "<what> '<text>' is not a whole number".
long long parse_integer_or_fail(std::string_view text, std::string_view what);

// "1048576", "64MiB", "2GiB", "512KiB", "8B": bytes; nullopt when not a whole number >= 0 or too large for 64 bits
// (`error` then says which).
enum class ByteCountError { kNone, kEmpty, kNotANumber, kNegative, kTooLarge };
std::optional<std::int64_t> parse_byte_count(std::string_view text, ByteCountError* error = nullptr);

// Input text made safe to echo in a one-line message: control characters (C0, DEL, C1 as UTF-8) and bytes that are
// not UTF-8 become escapes (\n, \t, \r, \e, \xHH), so an input can neither break the line nor drive the terminal;
// text longer than `max_chars` is cut with "...". Every parser quotes the input it refuses through this.
std::string printable(std::string_view text, size_t max_chars = 200);

// Size caps of the files reshard reads (docs/errors.md lists them).
inline constexpr std::uint64_t kMaxPlanFileBytes = std::uint64_t(1) << 30;      // 1 GiB
inline constexpr std::uint64_t kMaxProfileFileBytes = std::uint64_t(16) << 20;  // 16 MiB
inline constexpr std::uint64_t kMaxPlanFileSteps = 65536;                       // steps of a plan file

// The contents of a regular file of at most `max_bytes` bytes. kInvalidArgument naming `what` and the path when it
// cannot be opened, "is a directory", "is not a regular file" (FIFO, device, socket: refused without blocking) or
// "is larger than N MiB" (checked before reading and while reading, so a growing file stops at the cap).
std::string read_text_file(const std::string& path, std::string_view what, std::uint64_t max_bytes);

}  // namespace reshard
