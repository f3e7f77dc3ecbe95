// The executor's environment variables, read here and nowhere else (docs/cli.md lists every RESHARD_* variable). Each
// is read once per process.
#pragma once

namespace reshard {

// RESHARD_LOG=1: executors without a log callback write their lines to stderr.
bool env_log_to_stderr();
// RESHARD_TRACE_OPS set: the executor prints each operation as run() enqueues it (then the host time it took, and
// that of the run's buffer checks and exposure), and the nvlink transport each post and wait, to stderr.
bool env_trace_ops();

}  // namespace reshard
