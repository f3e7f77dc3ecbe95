// The batch benchmark (`reshard bench --batch N`): for each sweep case and strategy, N tensors of the case's shape in
// one executor call, next to one tensor holding all of them (the case's shape with dim 0 times N, the same
// placements) and one tensor of the case's shape alone. The acceptance figure is batch_us / one_us: a batch should
// cost about what one tensor of its total size costs, not N calls.
#pragma once

#include <functional>
#include <vector>

#include "reshard/harness.hpp"
#include "reshard/sweep.hpp"

namespace reshard {

struct BatchBenchOptions {
  int tensors = 100;
  std::vector<DType> dtypes;  // the batch's dtypes, cycled over its tensors; empty: the case's dtype for all
  Index coalesce_max_bytes = kDefaultCoalesceMaxBytes;
};

struct BatchBenchRow {
  SweepCase c;
  SweepRun run;
  int tensors = 0;
  Index batch_bytes = 0;  // the batch's global bytes (every tensor's)
  Index one_bytes = 0;    // the one large tensor's
  double batch_us = 0;    // median, the slowest rank's
  double one_us = 0;
  double single_us = 0;  // one tensor of the case's shape
  Index wrong = 0, checked = 0;
};

// Runs every case of a resolved sweep (sweep.hpp) as above; `on_row` gets each row as it is measured. Every case is
// planned first: one that cannot be (a dtype of --batch-dtypes that cannot reduce a Partial) is an error naming it
// before any row is measured.
std::vector<BatchBenchRow> run_batch_bench(const SweepOptions& resolved, const std::vector<SweepCase>& cases,
                                           const BatchBenchOptions& options,
                                           const std::function<void(const BatchBenchRow&)>& on_row = {});

}  // namespace reshard
