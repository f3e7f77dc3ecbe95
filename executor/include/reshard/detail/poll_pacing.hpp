// The pacing of a host wait that polls (a stream, a peer's number in shared memory): back to back for the first
// 2 ms, then one poll per 50 us sleep. A host all-gather or a small redistribution is done within tens of
// microseconds, and a sleep between polls rounds each such wait up to the scheduler's wake-up (50-110 us per wait).
// The slow checks (errors, the deadline) are due every 50 us either way.
//
//   PollPacing pace;
//   while (!done()) {
//     if (!pace.checks_due()) continue;  // spinning
//     ... errors, deadline ...
//     pace.rest();
//   }
#pragma once

#include <chrono>
#include <thread>

namespace reshard::detail {

class PollPacing {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::microseconds kSpin{2000};
  static constexpr std::chrono::microseconds kSleep{50};

  PollPacing() : start_(Clock::now()), next_check_(start_) {}

  Clock::time_point start() const { return start_; }
  // Whether the slow checks are due now (every kSleep); when they are, the next ones are due kSleep later.
  bool checks_due() {
    const Clock::time_point now = Clock::now();
    if (now < next_check_) return false;
    next_check_ = now + kSleep;
    return true;
  }
  // After the checks: sleeps kSleep once the spinning phase is over.
  void rest() const {
    if (Clock::now() - start_ >= kSpin) std::this_thread::sleep_for(kSleep);
  }

 private:
  Clock::time_point start_, next_check_;
};

}  // namespace reshard::detail
