#include "reshard/environment.hpp"

#include <cstdlib>
#include <string_view>

namespace reshard {

bool env_log_to_stderr() {
  static const bool on = [] {
    const char* v = std::getenv("RESHARD_LOG");
    return v != nullptr && std::string_view(v) == "1";
  }();
  return on;
}

bool env_trace_ops() {
  static const bool on = std::getenv("RESHARD_TRACE_OPS") != nullptr;
  return on;
}

}  // namespace reshard
