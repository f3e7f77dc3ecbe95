#include "reshard/text.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>

#include "reshard/error.hpp"

namespace reshard {
namespace {

// A file descriptor closed on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Length of the valid UTF-8 sequence at text[i] that is not a C1 control (U+0080..U+009F), or 0.
size_t utf8_printable_length(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = byte(i);
  size_t n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 0;
  if (n == 0 || i + n > text.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  if (n == 2 && c == 0xC2 && byte(i + 1) < 0xA0) return 0;   // C1 controls
  if (n == 3 && c == 0xE0 && byte(i + 1) < 0xA0) return 0;   // overlong
  if (n == 3 && c == 0xED && byte(i + 1) >= 0xA0) return 0;  // surrogates
  if (n == 4 && c == 0xF0 && byte(i + 1) < 0x90) return 0;   // overlong
  if (n == 4 && c == 0xF4 && byte(i + 1) >= 0x90) return 0;  // beyond U+10FFFF
  return n;
}

std::string mib_text(std::uint64_t bytes) {
  return bytes % (1 << 20) == 0 ? std::to_string(bytes >> 20) + " MiB" : std::to_string(bytes) + " bytes";
}

}  // namespace

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
  if (overflow) *overflow = ec == std::errc::result_out_of_range && p == text.data() + text.size();
  if (text.empty() || ec != std::errc() || p != text.data() + text.size()) return std::nullopt;
  return v;
}

long long parse_integer_or_fail(std::string_view text, std::string_view what) {
  if (text.empty()) fail(ErrorKind::kParse, cat(what, ": empty value"));
  bool overflow = false;
  std::optional<long long> v = parse_integer(text, &overflow);
  if (overflow) fail(ErrorKind::kParse, cat(what, " '", printable(text), "' does not fit in 64 bits"));
  if (!v) fail(ErrorKind::kParse, cat(what, " '", printable(text), "' is not a whole number"));
  return *v;
}

std::string printable(std::string_view text, size_t max_chars) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  size_t shown = 0;
  for (size_t i = 0; i < text.size(); ++shown) {
    if (shown == max_chars) {
      out += "...";
      break;
    }
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    if (c >= 0x80) {
      if (size_t n = utf8_printable_length(text, i)) {
        out.append(text.substr(i, n));
        i += n;
        continue;
      }
    }
    switch (c) {
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      case 0x1B:
        out += "\\e";
        break;
      default:
        out += "\\x";
        out += kHex[c >> 4];
        out += kHex[c & 15];
    }
    ++i;
  }
  return out;
}

std::string read_text_file(const std::string& path, std::string_view what, std::uint64_t max_bytes) {
  const std::string named = cat(what, " file '", printable(path), "'");
  // A path from an API (Python strings may hold NUL) would be opened cut at its first NUL: another file.
  if (path.find('\0') != std::string::npos)
    fail(ErrorKind::kInvalidArgument, cat(named, ": the path holds a NUL byte"));
  Fd f;
  // O_NONBLOCK: opening a FIFO for reading must not wait for a writer; the type check below refuses it.
  f.fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (f.fd < 0) fail(ErrorKind::kInvalidArgument, cat("cannot read ", named, ": ", std::strerror(errno)));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0)
    fail(ErrorKind::kInvalidArgument, cat("cannot read ", named, ": ", std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) fail(ErrorKind::kInvalidArgument, cat(named, " is a directory"));
  if (!S_ISREG(st.st_mode)) fail(ErrorKind::kInvalidArgument, cat(named, " is not a regular file"));
  const auto too_large = [&] {
    fail(ErrorKind::kInvalidArgument, cat(named, " is larger than ", mib_text(max_bytes)));
  };
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) too_large();
  // Reads at most max_bytes + 1 bytes: one more than the cap tells a file that grew while being read.
  const size_t limit = static_cast<size_t>(std::min<std::uint64_t>(max_bytes, SIZE_MAX - 1)) + 1;
  std::string text;
  text.resize(std::min(limit, static_cast<size_t>(st.st_size) + 1));
  size_t used = 0;
  while (used < limit) {
    if (used == text.size()) text.resize(std::min(limit, std::max<size_t>(4096, used * 2)));
    ssize_t k = ::read(f.fd, text.data() + used, text.size() - used);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) fail(ErrorKind::kInvalidArgument, cat("cannot read ", named, ": ", std::strerror(errno)));
    if (k == 0) break;
    used += static_cast<size_t>(k);
  }
  if (used > max_bytes) too_large();
  text.resize(used);
  return text;
}

std::optional<std::int64_t> parse_byte_count(std::string_view text, ByteCountError* error) {
  static const std::pair<const char*, std::int64_t> kSuffixes[] = {
      {"GiB", std::int64_t(1) << 30}, {"MiB", std::int64_t(1) << 20}, {"KiB", std::int64_t(1) << 10}, {"B", 1}};
  auto failed = [&](ByteCountError e) -> std::optional<std::int64_t> {
    if (error) *error = e;
    return std::nullopt;
  };
  if (text.empty()) return failed(ByteCountError::kEmpty);
  std::int64_t scale = 1;
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
  std::int64_t out = 0;
  if (__builtin_mul_overflow(*v, scale, &out)) return failed(ByteCountError::kTooLarge);
  if (error) *error = ByteCountError::kNone;
  return out;
}

}  // namespace reshard
