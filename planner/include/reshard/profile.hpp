// Profile: the machine parameters the cost model prices plans with, per link class and operation.
//
// JSON schema (docs/plan-json.md has the full reference):
// {
//   "schema": "reshard.profile/1", "name": "...", "source": "...",
//   "intra_node": {"p2p": {"alpha_us": a, "bandwidth_GBps": b[, "samples": [[bytes, us], ...]]}, "all_gather": {..},
//                  "reduce_scatter": {..},
//                  "all_reduce": {..}, "all_to_all": {..}},
//   "inter_node": { same five },
//   "p2p_per_peer_us": x,
//   "step_overhead_us": y,
//   "copy": {"alpha_us": a, "bandwidth_GBps": b},
//   "copy_engine": {"alpha_us": a, "bandwidth_GBps": b},                       (optional: defaults)
//   "nvlink": {"copy_engine": {..}, "kernel": {..}, "sync_us": s, "step_overhead_us": o,
//              "copy_engine_min_row_bytes": n[, "fused": {..}, "fused_overhead_us": f][, "map_us": m]
//              [, "first_map_us": m]}
//                                                                              (optional: defaults)
//   "low_sm_kernel_factor": f                                                  (optional: default)
// }
// Bandwidths are decimal GB/s (1e9 bytes/s): for collectives the bus bandwidth of nccl-tests, for p2p the
// per-direction bandwidth of one rank, for copy the bytes copied per second by a device-to-device kernel.
// Other top-level keys (e.g. "fits" written by calibration) are kept as text and ignored by the planner.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace reshard {

struct AlphaBeta {
  double alpha_us = 0;        // fixed cost per operation
  double bandwidth_GBps = 1;  // decimal GB/s
  // Optional measured (bytes, us) points, increasing in bytes (written by calibration). Inside their range the
  // time is interpolated between them (linearly in log-log), which follows NCCL's protocol changes that one
  // alpha-beta line cannot; below it the first point's time; above it the last point plus bytes / bandwidth.
  std::vector<std::pair<double, double>> samples;
  // The operation's time in microseconds.
  double time_us(double bytes) const;
  friend bool operator==(const AlphaBeta&, const AlphaBeta&) = default;
};

struct LinkProfile {
  AlphaBeta p2p, all_gather, reduce_scatter, all_reduce, all_to_all;
  friend bool operator==(const LinkProfile&, const LinkProfile&) = default;
};

// The NVLink one-sided transport (ranks of one host with peer access): regions pulled straight from a peer's tensor.
struct OneSidedProfile {
  AlphaBeta copy_engine;  // a peer region pulled by the copy engines: alpha per copy call, bandwidth per direction
  AlphaBeta kernel;       // peer regions pulled (or reduced in place) by one load/store kernel
  double sync_us = 0;     // a step's ordering: ready and done flags written into the peers and waited for
  double step_overhead_us = 0;  // host work per one-sided step per call (copy calls, flag operations)
  // Small steps fused into one kernel per rank per call (flags, peer loads and local copies in one launch): alpha is
  // the launch and flag round trips, bandwidth what the kernel pulls; fused_overhead_us its host work per call.
  AlphaBeta fused;
  double fused_overhead_us = 0;
  long long copy_engine_min_row_bytes = 0;  // regions with shorter contiguous rows (or over 3-D) go to the kernel
  // Host work of mapping a peer's new tensor, per (rank, peer it reads) pair, for callers whose tensors change every
  // call (PlanOptions::buffers_change): what a one-sided step reading them costs on top, unless it is staged. A
  // caching allocator's tensors lie in allocations the peers have mapped before, so this is the per-call cost with
  // the mappings cached (the exposure's host round trip); first_map_us is what a reader's first mapping of an
  // allocation costs, paid once per allocation and reader (not priced per call).
  double map_us = 0;
  double first_map_us = 0;
  friend bool operator==(const OneSidedProfile&, const OneSidedProfile&) = default;
};

struct Profile {
  std::string name;
  std::string source;  // where the numbers come from
  LinkProfile intra_node, inter_node;
  double p2p_per_peer_us = 0;   // added latency per peer of a p2p step (NCCL per-peer setup and progress)
  double step_overhead_us = 0;  // fixed cost of every step that communicates (launches, events, NCCL group calls)
  AlphaBeta copy;               // pack, unpack and local-copy kernels
  AlphaBeta copy_engine;        // local device-to-device copies on the copy engines (one way)
  OneSidedProfile nvlink;
  // Low-SM mode (PlanOptions::low_sm): work run by SM kernels is priced at this multiple of its time alone (its own
  // slowdown beside compute plus the compute it displaces); copy-engine work is not. In [1, 100].
  double low_sm_kernel_factor = 1;
  std::string extra_json;  // other top-level keys, verbatim (calibration fits)
  // Every field, exactly (PlanCache tells profiles apart with it).
  friend bool operator==(const Profile&, const Profile&) = default;
};

// Defaults for H100/H200 NVLink within a node and 400 Gb/s InfiniBand (one NIC per GPU) between nodes.
// Each number's origin is in `source` and in docs/planner.md.
Profile default_profile();

// Parses and validates a profile; kInvalidArgument / kParse naming the field, the value and what was expected
// for a missing field, a wrong type, a negative latency or a non-positive bandwidth.
Profile profile_from_json(const std::string& text);
Profile load_profile(const std::string& path);
std::string profile_to_json(const Profile& profile);

}  // namespace reshard
