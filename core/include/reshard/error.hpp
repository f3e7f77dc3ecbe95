// Error handling for the whole library: one exception type with a kind.
//
// Every layer reports failure by throwing reshard::Error. The kind lets callers (the CLI, a runtime)
// decide what to do: bad input from a user (kInvalidArgument, kParse) is exit code 2 in the CLI;
// everything else is a runtime failure.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace reshard {

enum class ErrorKind {
  kInvalidArgument,  // a value the caller passed is not acceptable (shape, placement, option, buffer size)
  kParse,            // text (CLI string, JSON) could not be parsed
  kTimeout,          // a communication did not complete within the configured time
  kBackend,          // CUDA, NCCL or the host transport reported a failure
  kMismatch,         // a verification found wrong data
  kInternal,         // a broken invariant inside reshard (a bug)
  kUnmappable,       // a one-sided plan's buffer cannot be mapped by the peers (no run enqueued; run another plan)
};

std::string_view to_string(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

// Concatenates any streamable values into a string: cat("shape ", 3, "x", 4).
template <class... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

[[noreturn]] inline void fail(ErrorKind kind, const std::string& message) { throw Error(kind, message); }

}  // namespace reshard

// Throws reshard::Error(kInvalidArgument, cat(message...)) when the condition does not hold. The message is only
// built on failure, so checks cost nothing on hot paths.
#define RESHARD_REQUIRE(condition, ...)                                                                     \
  do {                                                                                                      \
    if (!(condition)) ::reshard::fail(::reshard::ErrorKind::kInvalidArgument, ::reshard::cat(__VA_ARGS__)); \
  } while (false)

namespace reshard {}  // namespace reshard
