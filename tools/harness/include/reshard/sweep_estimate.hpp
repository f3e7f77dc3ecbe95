// How long a sweep takes, known before it starts. One run's wall time (its warm-up and timed iterations, and the
// verification) is modelled as fixed + per byte * tensor bytes, a line through two runs timed first: the sweep's
// smallest run that moves data and its largest up to a probe size (4 MiB on the host backend, 64 MiB on GPUs, so
// that the probes stay short). The estimate sums the line over every run of the sweep, counting the CUDA-graph
// replays of auto's choice as one run more.
#pragma once

#include <cstddef>
#include <vector>

#include "reshard/sweep.hpp"

namespace reshard {

struct RunCost {
  double fixed_s = 0, per_byte_s = 0;
  double seconds(Index bytes) const { return fixed_s + per_byte_s * static_cast<double>(bytes); }
};

// The line through (small_bytes, small_s) and (large_bytes, large_s), neither coefficient negative: a larger run that
// was not slower gives a flat line at the slower of the two; equal sizes give their mean.
RunCost fit_run_cost(Index small_bytes, double small_s, Index large_bytes, double large_s);

// The tensor's bytes (global volume times element size).
Index case_bytes(const SweepCase& c);

// The cases to time first: the smallest one that moves data (placements or meshes differ; else the smallest) and
// the largest of at most probe_bytes (omitted when it is the same case). Indexes into `cases`, none when empty.
std::vector<size_t> probe_cases(const std::vector<SweepCase>& cases, Index probe_bytes);

// The probe size of a backend: 4 MiB on the host backend, 64 MiB on GPUs.
Index probe_bytes(Backend backend);

// Every run of the cases priced by `cost`: seconds.
double estimate_sweep_seconds(const std::vector<SweepCase>& cases, const SweepOptions& o, const RunCost& cost);

// The cases of the smallest tensor sizes whose estimate fits in budget_s (those of the smallest size always), in
// their order.
std::vector<SweepCase> fit_to_budget(std::vector<SweepCase> cases, const SweepOptions& o, const RunCost& cost,
                                     double budget_s);

}  // namespace reshard
