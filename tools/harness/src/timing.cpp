#include "reshard/timing.hpp"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstring>
#include <numeric>
#include <thread>

#include "reshard/interrupt.hpp"

namespace reshard {

// ---- stop requests -----------------------------------------------------------------------------------------------

namespace {
std::atomic<int> g_stop_signal{0};
}  // namespace

void request_stop(int signal_number) { g_stop_signal.store(signal_number > 0 ? signal_number : SIGINT); }
bool stop_requested() { return g_stop_signal.load(std::memory_order_relaxed) != 0; }
int stop_signal() { return g_stop_signal.load(); }
void clear_stop() { g_stop_signal.store(0); }

Interrupted::Interrupted()
    : Error(ErrorKind::kBackend, cat("interrupted by signal ", stop_signal(), " (", ::strsignal(stop_signal()), ")")) {}

void throw_if_stop_requested() {
  if (stop_requested()) throw Interrupted();
}

// ---- samples -----------------------------------------------------------------------------------------------------

namespace {
std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
}  // namespace

IterationSamples::IterationSamples(size_t capacity) : capacity_(std::max<size_t>(capacity, 1)), rng_(0x5eed) {}

void IterationSamples::add(double us) {
  ++count_;
  if (values_.size() < capacity_) {
    values_.push_back(us);
    return;
  }
  // Algorithm R: the new iteration replaces a kept one with probability capacity / count.
  std::uint64_t j = splitmix64(rng_) % static_cast<std::uint64_t>(count_);
  if (j < capacity_) values_[j] = us;
}

void IterationSamples::max_with(const IterationSamples& other) {
  RESHARD_REQUIRE(other.count_ == count_ && other.values_.size() == values_.size(),
                  "combining timings of different runs (", count_, " and ", other.count_, " iterations)");
  for (size_t i = 0; i < values_.size(); ++i) values_[i] = std::max(values_[i], other.values_[i]);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

TimingSummary summarize(const IterationSamples& s) {
  TimingSummary t;
  t.iterations = s.count();
  std::vector<double> v = s.values();
  t.samples = static_cast<Index>(v.size());
  if (v.empty()) return t;
  std::sort(v.begin(), v.end());
  t.min_us = v.front();
  t.max_us = v.back();
  t.median_us = median(v);
  t.p90_us = v[std::min(v.size() - 1, static_cast<size_t>(0.9 * static_cast<double>(v.size() - 1) + 0.5))];
  t.mean_us = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  return t;
}

// ---- loops -------------------------------------------------------------------------------------------------------

bool poll_until(const std::function<bool()>& done, std::chrono::milliseconds timeout,
                std::chrono::microseconds interval) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (done()) return true;
    throw_if_stop_requested();
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(interval);
  }
}

IterationSamples time_host_calls(int iters, const std::function<void()>& run) {
  using Clock = std::chrono::steady_clock;
  IterationSamples samples;
  for (int i = 0; i < iters; ++i) {
    throw_if_stop_requested();
    auto t0 = Clock::now();
    run();
    samples.add(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  return samples;
}

}  // namespace reshard
