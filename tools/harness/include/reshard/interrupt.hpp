// Stop requests for long runs: the CLI turns SIGINT/SIGTERM into request_stop(); the harness's timed loops and polls
// check stop_requested() between iterations and throw Interrupted, so every rank unwinds and releases what it holds.
#pragma once

#include "reshard/error.hpp"

namespace reshard {

void request_stop(int signal_number);
bool stop_requested();
int stop_signal();  // the signal passed to request_stop (0 when none)
void clear_stop();

class Interrupted : public Error {
 public:
  Interrupted();
};

// Throws Interrupted when a stop was requested.
void throw_if_stop_requested();

}  // namespace reshard
