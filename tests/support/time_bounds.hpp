// Wall-clock bounds of tests that check a request is answered or refused promptly (not speed targets: those live in
// benchmarks).
#pragma once

#include <chrono>

namespace reshard::testing {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr double kSlowdown = 6;  // the sanitizer build's time bounds are this much looser
#else
inline constexpr double kSlowdown = 1;
#endif

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace reshard::testing
