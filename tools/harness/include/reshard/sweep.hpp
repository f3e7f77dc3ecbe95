// The benchmark sweep (`reshard bench`): redistributions over mesh shapes, placement pairs, tensor shapes, dtypes and
// strategies, each verified and timed, next to the cost model's estimate and the link-bandwidth lower bound.
//
// Metrics (decimal GB/s, run_record.hpp): algbw = tensor bytes / time; busbw = the slowest rank's max(bytes in,
// bytes out) / time; bound = max(that max / link GB/s, the slowest rank's local-copy bytes / device-copy GB/s), with
// link GB/s the larger of a measured cudaMemcpyPeer and NCCL send/recv (NCCL backend only: the host backend has no
// link, so its rows have no bound and no CUDA-graph time).
//
// Every case is planned before the first measurement, so the number of runs is known (progress and ETA), the sweep's
// time is estimated from two runs timed first (sweep_estimate.hpp), and the memory of the largest run is checked up
// front (memory_check.hpp).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "reshard/harness.hpp"
#include "reshard/planner.hpp"
#include "reshard/run_record.hpp"

namespace reshard {

// This process's place in a job of one process per rank.
struct SweepProcess {
  int rank = 0, world_size = 1, device = 0;
  std::string rendezvous;  // file:PATH or tcp:HOST:PORT
};

struct SweepOptions {
  std::vector<std::vector<int>> meshes;  // empty: (2), (1,2), (2,1) with 2 GPUs; more for more GPUs
  // Source and target meshes of one world (`bench --from-mesh ... --to-mesh ...`): the sweep runs between them (source
  // placements over the source mesh's dims, target placements over the target's) instead of on `meshes`.
  std::optional<std::pair<Mesh, Mesh>> between;
  // Empty (and no shapes): on GPUs 1 MiB to 1 GiB in x4 steps; on the host backend 16 KiB to 64 MiB, cut to a time
  // budget (time_budget_s).
  std::vector<Index> sizes_bytes;
  std::vector<Dims> shapes;  // explicit tensor shapes, run instead of sizes when given
  std::vector<DType> dtypes{DType::kF32, DType::kBF16};
  std::vector<Strategy> strategies{Strategy::kCollective, Strategy::kP2P, Strategy::kHybrid};
  std::vector<Transport> transports{Transport::kNccl, Transport::kNvlink};  // p2p and hybrid run on each available
  std::vector<std::string> placements{"R", "S0", "S1"};                     // per mesh dim; every pair is run
  Backend backend = Backend::kNccl;
  NcclMode nccl_mode = NcclMode::kNonBlocking;
  PlanOptions plan;  // profile, topology, pipelining
  // Every case's target dtype (`bench --to-dtype`): its plans convert on the receiver (a case of this dtype: none).
  std::optional<DType> to_dtype;
  int iters = 20;
  int warmup = 5;
  Index graph_max_bytes = 4 << 20;  // also time CUDA-graph replays of auto's plan up to this size (NCCL)
  bool measure_link = true;
  // run_sweep keeps the cases of the smallest sizes whose estimated time fits (those of the smallest size always).
  // resolve_sweep sets it to 60 s for the host backend's default sizes, so that a sweep without flags takes about a
  // minute on any machine.
  std::optional<double> time_budget_s;
  // One process per rank (under a launcher), NCCL backend: every process of the job runs the same sweep, each as its
  // rank; every mesh must span the job's world (the default meshes do). Rank 0 measures the link.
  std::optional<SweepProcess> process;
};

// A plan of a case: a strategy on a transport (collectives: NCCL).
struct SweepRun {
  Strategy strategy = Strategy::kCollective;
  Transport transport = Transport::kNccl;
  friend bool operator==(const SweepRun&, const SweepRun&) = default;
};

// One tensor on one mesh between two placements, and the strategies that run it.
struct SweepCase {
  std::vector<int> mesh;                         // the source mesh's shape
  std::optional<std::pair<Mesh, Mesh>> between;  // the source and target meshes when they differ
  std::vector<Placement> from, to;
  Dims shape;
  DType dtype = DType::kF32;
  std::vector<SweepRun> runs;  // requested and available for this case
  SweepRun auto_choice;
};

// The options with their defaults filled in (meshes for the visible GPUs, sizes) and every case, planned.
SweepOptions resolve_sweep(const SweepOptions& options);
std::vector<SweepCase> sweep_cases(const SweepOptions& resolved);
size_t sweep_runs(const std::vector<SweepCase>& cases);
// The cases as JSON for bench/pytorch_baseline.py: [{"mesh", "from", "to", "shape", "dtype"}, ...]; between meshes,
// for bench/pytorch_cross_mesh.py: [{"from_mesh", "from_ranks", "to_mesh", "to_ranks", "from", "to", "shape",
// "dtype"}, ...].
std::string sweep_cases_json(const std::vector<SweepCase>& cases);

struct SweepLink {
  LinkMeasurement measured;  // NCCL backend with measure_link and 2 GPUs
  double link_GBps = 0, copy_GBps = 0;
  bool applies = false;  // false on the host backend: no bound
};

// What run_sweep knows before its first measurement.
struct SweepStart {
  const std::vector<SweepCase>& cases;  // those it runs (time_budget_s may have left out the largest sizes)
  size_t runs = 0;
  double estimate_s = 0;  // the sweep's wall time, estimated (sweep_estimate.hpp)
};

struct SweepEvents {
  std::function<void(const SweepLink& link, const SweepStart& start)> on_start;  // before the first measurement
  std::function<void(const RunRecord& row, size_t done, size_t runs)> on_row;
};

struct SweepSummary {
  size_t runs = 0;
  Index wrong = 0, checked = 0;
};

// Times the probe runs and estimates the sweep (keeping the cases that fit time_budget_s), checks the largest run's
// memory, measures the link, then runs every case; `events` get each row as it is made. A stop request
// (interrupt.hpp) ends it with Interrupted between runs.
SweepSummary run_sweep(const SweepOptions& resolved, std::vector<SweepCase> cases, const SweepEvents& events);

// A 2-D shape of `bytes` / element size elements, as square as powers of two allow.
Dims sweep_shape(Index bytes, DType dtype);

}  // namespace reshard
