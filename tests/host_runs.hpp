// Run options for quick verified runs on the host backend in tests: no warm-up, one timed run (the harness still
// checks every element after two poisoned runs and the timed one).
#pragma once

#include <chrono>

#include "reshard/harness.hpp"

namespace reshard::testing {

inline RunOptions quick_host_run() {
  RunOptions o;
  o.backend = Backend::kHost;
  o.warmup = 0;
  o.iters = 1;
  o.timeout = std::chrono::seconds(30);
  return o;
}

}  // namespace reshard::testing
