// Batches on the command line (plan_batch.hpp): `reshard run` and `reshard bench` with --batch N (the tensor flags'
// tensor N times, dtypes cycled from --batch-dtypes), `reshard run` also with --tensor SHAPE:FROM:TO[:DTYPE]
// (repeatable: more tensors on the same mesh).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli_common.hpp"
#include "cli_output.hpp"
#include "reshard/harness.hpp"
#include "reshard/sweep.hpp"

namespace reshard::cli {

struct BatchFlags {
  CLI::Option* count_option = nullptr;
  int count = 1;
  std::string dtypes;                // cycled over the --batch copies
  std::vector<std::string> tensors;  // --tensor specs (run)
  std::string coalesce;              // --coalesce-bytes
  bool given() const { return (count_option && count_option->count() > 0) || !tensors.empty(); }
};

// `run`: --batch, --batch-dtypes, --tensor, --coalesce-bytes; otherwise (bench) all but --tensor.
void add_batch_flags(CLI::App& cmd, BatchFlags& flags, bool run);

// reshard run with a batch: every rank in this process (host threads or one GPU each), verified and timed.
int run_batch_command(const PlanRequest& request, const BatchFlags& flags, RunOptions options,
                      std::optional<Output>& json);

// reshard bench --batch N over the resolved sweep's cases (batch_bench.hpp).
int bench_batch_command(const SweepOptions& resolved, const BatchFlags& flags, std::optional<Output>& json,
                        std::optional<Output>& csv);

}  // namespace reshard::cli
