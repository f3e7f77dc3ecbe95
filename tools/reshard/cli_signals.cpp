#include "cli_signals.hpp"

#include <fmt/format.h>
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "reshard/interrupt.hpp"

namespace reshard::cli {
namespace {

sigset_t watched_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);  // the destructor's wake-up
  return set;
}

[[noreturn]] void end_process(const std::string& command, int sig) {
  const char* name = sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "a signal";
  std::string line = fmt::format(
      "reshard {}: interrupted by {} (signal {}); a rank did not unwind in time, so the process ends here (the "
      "system releases its GPUs and communicators)\n",
      command, name, sig);
  std::fflush(stdout);
  std::fputs(line.c_str(), stderr);
  std::_Exit(128 + sig);
}

}  // namespace

std::string interrupted_message(int sig) {
  const char* name = sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "a signal";
  return fmt::format("interrupted by {} (signal {}); stopped cleanly (buffers, GPUs and communicators released)", name,
                     sig);
}

InterruptWatcher::InterruptWatcher(std::string command, std::chrono::milliseconds grace)
    : command_(std::move(command)), grace_(grace) {
  sigset_t set = watched_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  clear_stop();
  thread_ = std::thread([this] { watch(); });
}

InterruptWatcher::~InterruptWatcher() {
  pthread_kill(thread_.native_handle(), SIGUSR1);
  thread_.join();
}

void InterruptWatcher::watch() {
  const sigset_t set = watched_signals();
  int first = 0;
  auto deadline = std::chrono::steady_clock::now();
  while (true) {
    int sig = 0;
    if (!first) {
      if (sigwait(&set, &sig) != 0) continue;
    } else {
      auto left = deadline - std::chrono::steady_clock::now();
      if (left <= std::chrono::nanoseconds(0)) end_process(command_, first);
      auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
      timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
      sig = sigtimedwait(&set, nullptr, &ts);
      if (sig < 0) continue;  // timed out (or EINTR): check the deadline again
    }
    if (sig == SIGUSR1) return;  // the command finished
    if (first) end_process(command_, sig);
    first = sig;
    request_stop(sig);
    deadline = std::chrono::steady_clock::now() + grace_;
  }
}

}  // namespace reshard::cli
