// Timing of repeated runs in memory that does not grow with the iteration count, and the harness's one polling
// helper.
//
// Per-iteration times are kept as a uniform sample of at most `capacity` iterations (reservoir sampling with a fixed
// seed): exact while there are no more iterations than that, a uniform sample of them beyond. Every rank of a run
// draws the same random numbers, so slot i holds the same iteration on every rank and samples combine iteration by
// iteration (the slowest rank's time), in one process or across processes.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "reshard/dims.hpp"

namespace reshard {

class IterationSamples {
 public:
  static constexpr size_t kDefaultCapacity = 4096;

  explicit IterationSamples(size_t capacity = kDefaultCapacity);
  void add(double us);
  // Iterations seen; the samples kept (min(count, capacity) of them, in slot order, not chronological).
  Index count() const { return count_; }
  const std::vector<double>& values() const { return values_; }
  std::vector<double>& mutable_values() { return values_; }  // for combining across processes (same slots)
  // Slot by slot maximum with the samples of another rank of the same run (same capacity and count).
  void max_with(const IterationSamples& other);

 private:
  size_t capacity_;
  Index count_ = 0;
  std::uint64_t rng_;
  std::vector<double> values_;
};

// Statistics of a run's iterations (microseconds), from the kept samples.
struct TimingSummary {
  Index iterations = 0;  // timed iterations
  Index samples = 0;     // iterations the figures are computed from (all of them up to 4096)
  double min_us = 0, median_us = 0, p90_us = 0, max_us = 0, mean_us = 0;
  // GPU runs: the host's time to enqueue one iteration (the slowest rank's mean over the timed loop, waits for the
  // event ring excluded). Near median_us, the run was bound by the host's launches rather than the GPU; unset on the
  // host backend, where a call is its work.
  std::optional<double> issue_us;
};
TimingSummary summarize(const IterationSamples& samples);

// Median of a list (0 when empty).
double median(std::vector<double> values);

// Calls `done` every `interval` until it returns true (then returns true) or `timeout` has passed without it
// (returns false). A stop request (interrupt.hpp) throws Interrupted.
bool poll_until(const std::function<bool()>& done, std::chrono::milliseconds timeout,
                std::chrono::microseconds interval = std::chrono::microseconds(50));

// Times `iters` calls of `run` on the host clock, the way the host backend runs (each call is done when it returns);
// checks for a stop request between calls.
IterationSamples time_host_calls(int iters, const std::function<void()>& run);

}  // namespace reshard
