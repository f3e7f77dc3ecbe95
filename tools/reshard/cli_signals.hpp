// SIGINT and SIGTERM during the long commands (run, bench, calibrate).
//
// The signals are blocked in every thread and taken by a watcher thread (sigwait), which asks the harness to stop
// (interrupt.hpp): the timed loops end between iterations, every rank unwinds and releases its buffers and
// communicators, and main() prints one line and exits 128 + the signal number. When the command has not unwound
// within the grace period (a rank blocked in a driver call), the watcher prints the line and ends the process,
// which releases the GPUs and communicators too; a second signal ends it at once.
#pragma once

#include <chrono>
#include <string>
#include <thread>

namespace reshard::cli {

class InterruptWatcher {
 public:
  // Blocks the signals in the calling thread (threads started later inherit it); call before starting any.
  explicit InterruptWatcher(std::string command, std::chrono::milliseconds grace = std::chrono::seconds(3));
  ~InterruptWatcher();
  InterruptWatcher(const InterruptWatcher&) = delete;
  InterruptWatcher& operator=(const InterruptWatcher&) = delete;

 private:
  void watch();
  std::string command_;
  std::chrono::milliseconds grace_;
  std::thread thread_;
};

// What is printed after "reshard <command>: " for an interrupted command (whose exit code is 128 + signal).
std::string interrupted_message(int signal_number);

}  // namespace reshard::cli
