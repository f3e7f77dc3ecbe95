// Run options for quick verified runs in tests: on the host backend no warm-up and one timed run, on GPUs one warm-up
// and two (the harness still checks every element after two poisoned runs and the timed ones).
#pragma once

#include <chrono>

#include "reshard/harness.hpp"

namespace reshard::testing {

inline RunOptions quick_run(Backend backend) {
  const bool host = backend == Backend::kHost;
  RunOptions o;
  o.backend = backend;
  o.warmup = host ? 0 : 1;
  o.iters = host ? 1 : 2;
  o.timeout = std::chrono::seconds(host ? 30 : 60);
  return o;
}

inline RunOptions quick_host_run() { return quick_run(Backend::kHost); }

}  // namespace reshard::testing
