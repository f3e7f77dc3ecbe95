// The benchmark sweep (`reshard bench`): redistributions over mesh shapes, placement pairs, sizes, dtypes and
// strategies, each verified and timed, next to the cost model's estimate and the link-bandwidth lower bound.
//
// Metrics (decimal GB/s): algbw = tensor bytes / time; busbw = the slowest rank's max(bytes in, bytes out) / time;
// bound = max(that max / link GB/s, the slowest rank's local-copy bytes / device-copy GB/s), with link GB/s the
// larger of a measured cudaMemcpyPeer and NCCL send/recv (or the profile's value without GPUs).
#pragma once

#include <string>
#include <vector>

#include "reshard/harness.hpp"
#include "reshard/planner.hpp"

namespace reshard {

struct SweepOptions {
  std::vector<std::vector<int>> meshes;  // empty: (2), (1,2), (2,1) with 2 GPUs; more for more GPUs
  std::vector<Index> sizes_bytes;        // empty: 1 MiB to 1 GiB in x4 steps
  std::vector<DType> dtypes{DType::kF32, DType::kBF16};
  std::vector<Strategy> strategies{Strategy::kCollective, Strategy::kP2P, Strategy::kHybrid};
  std::vector<std::string> placements{"R", "S0", "S1"};  // per mesh dim; every pair is run
  Backend backend = Backend::kNccl;
  PlanOptions plan;  // profile, topology, pipelining
  int iters = 20;
  int warmup = 5;
  Index graph_max_bytes = 4 << 20;  // also time CUDA-graph replays of auto's plan up to this size (NCCL)
  bool measure_link = true;
  std::string csv_path, json_path;
  std::string cases_path;  // the cases as JSON for bench/pytorch_baseline.py
};

struct SweepRow {
  std::string mesh, from, to, shape, dtype, strategy;
  bool auto_choice = false;
  Index tensor_bytes = 0, max_rank_bytes = 0;
  double estimated_us = 0, median_us = 0, graph_us = 0;  // graph_us: 0 when not measured
  double algbw = 0, busbw = 0, bound_us = 0;
  Index wrong = 0, checked = 0;
  size_t workspace = 0;
  std::string steps;  // per-step kinds
};

struct SweepResult {
  LinkMeasurement link;
  std::vector<SweepRow> rows;
};

// Prints one nccl-tests style line per run to `log` as it goes; writes CSV / JSON / cases when paths are set.
SweepResult run_sweep(const SweepOptions& options, std::ostream& log);

// A 2-D shape of `bytes` / element size elements, as square as powers of two allow.
Dims sweep_shape(Index bytes, DType dtype);

}  // namespace reshard
