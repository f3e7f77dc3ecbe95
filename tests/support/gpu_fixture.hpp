// The fixture of the executor's GPU tests (they skip where fewer than 2 GPUs are visible): a 2-rank NCCL runner for
// the suite, verified runs counted for the summary the suite prints at the end.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>

#include "reshard/harness.hpp"
#include "reshard/planner.hpp"

namespace reshard::testing {

inline std::atomic<long long> g_runs{0}, g_checked{0}, g_wrong{0};

// RESHARD_GPU_TESTS_LIGHT=1 (runs under compute-sanitizer): small shapes, one dtype per pair, mesh (2) only, no 1 GiB
// tensors.
inline bool light() {
  const char* v = std::getenv("RESHARD_GPU_TESTS_LIGHT");
  return v && *v == '1';
}

class Gpu : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (local_gpu_count() >= 2) runner_ = new LocalRunner(Backend::kNccl, 2, std::chrono::seconds(60));
  }
  static void TearDownTestSuite() {
    delete runner_;
    runner_ = nullptr;
  }
  void SetUp() override {
    if (local_gpu_count() < 2) GTEST_SKIP() << "needs 2 GPUs; " << local_gpu_count() << " visible";
  }
  static RunResult check(const Plan& plan, RunOptions o = quick()) {
    RunResult r = runner_->run(plan, o);
    ++g_runs;
    g_checked += r.checked_elements;
    g_wrong += r.wrong_elements;
    EXPECT_EQ(r.wrong_elements, 0) << plan.src().str() << " -> [" << to_string(plan.dst().placements()) << "] "
                                   << to_string(plan.dtype()) << " " << to_string(plan.strategy());
    return r;
  }
  static RunOptions quick() {
    RunOptions o;
    o.warmup = 0;
    o.iters = 1;
    return o;
  }
  inline static LocalRunner* runner_ = nullptr;
};

}  // namespace reshard::testing
