#include "reshard/error.hpp"

namespace reshard {

std::string_view to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument:
      return "invalid argument";
    case ErrorKind::kParse:
      return "parse error";
    case ErrorKind::kTimeout:
      return "timeout";
    case ErrorKind::kBackend:
      return "backend error";
    case ErrorKind::kMismatch:
      return "mismatch";
    case ErrorKind::kInternal:
      return "internal error";
    case ErrorKind::kUnmappable:
      return "unmappable buffer";
  }
  return "error";
}

}  // namespace reshard
