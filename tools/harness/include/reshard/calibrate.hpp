// Cost-model calibration (`reshard calibrate`): microbenchmarks on the local GPUs, alpha-beta fits by least
// squares (Eigen), and a profile JSON the planner reads.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "reshard/profile.hpp"
#include "reshard/topology.hpp"

namespace reshard {

struct Sample {
  double x = 0;   // the model's byte count for the operation (e.g. (n-1) * chunk for all_gather)
  double us = 0;  // measured median time
};

struct Fit {
  AlphaBeta params;
  double rms_rel_error = 0, max_rel_error = 0;
  std::vector<Sample> samples;
  std::vector<double> rel_residuals;  // (model - measured) / measured, per sample
};

// Which error a fit minimises: relative (weighted by 1/us^2, so small sizes count as much as large ones) or absolute
// (the large sizes, where the bandwidth shows, dominate).
enum class FitError { kRelative, kAbsolute };

// Least squares of us = alpha + x / (bandwidth * 1e3) on `error`. A negative alpha is clamped to 0 and the bandwidth
// refitted; a non-positive slope is an error (kInvalidArgument) naming `what`.
Fit fit_alpha_beta(const std::vector<Sample>& samples, const std::string& what, FitError error = FitError::kRelative);

struct CalibrateOptions {
  std::vector<double> sizes_bytes;  // empty: 4 KiB to 1 GiB in x4 steps
  int iters = 20;
  int warmup = 3;
  Profile base = default_profile();  // fields calibration cannot measure (inter-node, per-peer) come from here
  // The profile link NCCL's fits describe: intra_node, or inter_node when NCCL is made to take its network path
  // between the two local GPUs (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1: what it does between nodes); the other
  // link's figures come from `base`.
  LinkClass nccl_link = LinkClass::kIntraNode;
  // Called before each measurement: its name, how many are done, how many there are in all.
  std::function<void(const std::string& what, int done, int total)> progress;
};

struct Calibration {
  Profile profile;  // fitted intra-node links and copy; base values elsewhere; fits in extra_json
  std::vector<std::pair<std::string, Fit>> fits;
  std::string machine;
  bool peer_access = false;  // GPUs 0 and 1 address each other's memory: the nvlink fields were measured
};

// Needs 2 local GPUs (kInvalidArgument otherwise). A stop request (interrupt.hpp) ends it with Interrupted.
Calibration calibrate(const CalibrateOptions& options);

// One process of a job of two, one process per node (RANK 0 or 1 from a launcher, `device` its GPU), meeting through
// `rendezvous` (file:PATH or tcp:HOST:PORT): measures NCCL between the two processes' GPUs, the path it takes between
// nodes, into the profile's inter_node link (options.nccl_link is not read); everything else is options.base's. Both
// ranks return the same figures (each size's slower rank). Calibration::machine names both hosts and GPUs.
Calibration calibrate_between_processes(const CalibrateOptions& options, int rank, int device,
                                        const std::string& rendezvous);

}  // namespace reshard
