// The one-sided (nvlink) part of `reshard calibrate`: end-to-end S0 -> S1 runs on mesh (2), ranks as threads, each
// run verified, timed like any other run (the slower rank's median per iteration, eager), separate copies and fused.
// Mapping costs need one process per GPU: the CLI measures them (tools/reshard/calibrate_mapping.hpp).
#include "calibrate_nvlink.hpp"

#include <algorithm>

#include "reshard/cuda_check.hpp"
#include "reshard/harness.hpp"
#include "reshard/planner.hpp"

namespace reshard::detail {
namespace {

// Rank 0's bytes of the plan's one step: pulled from the peer, and copied locally.
struct RankBytes {
  double pulled = 0, local = 0;
};
RankBytes rank0_bytes(const Plan& plan) {
  RankBytes b;
  for (const Transfer& t : plan.steps().at(0).transfers) {
    if (t.dst != 0) continue;
    (t.src == 0 ? b.local : b.pulled) += static_cast<double>(t.bytes);
  }
  return b;
}

double smallest(const std::vector<Sample>& samples) {
  return std::min_element(samples.begin(), samples.end(), [](const Sample& a, const Sample& b) { return a.us < b.us; })
      ->us;
}

}  // namespace

std::string calibrate_nvlink(Calibration& cal, const CalibrateOptions& o) {
  int can = 0;
  RESHARD_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, 0, 1));
  if (!can) return "nvlink fields from the base profile (GPUs 0 and 1 cannot address each other's memory)";
  cal.peer_access = true;
  double largest = 0;
  for (double s : o.sizes_bytes) largest = std::max(largest, s);
  LocalRunner runner(Backend::kNccl, 2);
  std::vector<Sample> separate, fused;
  // Square f32 tensors of 256 KiB to 256 MiB, fused at every size; separate copies from 4 MiB, where the pulled
  // block's rows (2 KiB and more) go to the copy engines (narrower rows go to kernels, whose fields stay the base
  // profile's).
  for (Index n = 256; static_cast<double>(n * n * 4) <= largest && n <= 8192; n *= 2) {
    const Layout src(Mesh({2}), parse_placements("S0"), Dims{n, n});
    const Layout dst = src.with_placements(parse_placements("S1"));
    for (Fusion f : {Fusion::kNever, Fusion::kAlways}) {
      if (f == Fusion::kNever && n < 1024) continue;
      PlanOptions po;
      po.profile = cal.profile;
      po.strategy = Strategy::kP2P;
      po.transport = Transport::kNvlink;
      po.fusion = f;
      const Plan plan = make_plan(src, dst, DType::kF32, po);
      RunOptions ro;
      ro.backend = Backend::kNccl;
      ro.iters = std::max(o.iters, 20);
      ro.warmup = std::max(o.warmup, 3);
      const RunResult r = runner.run(plan, ro);
      if (r.wrong_elements != 0)
        fail(ErrorKind::kMismatch, cat("calibrate: the nvlink run of ", n, "x", n, " f32 S0 -> S1 had ",
                                       r.wrong_elements, " wrong elements; nothing fitted"));
      const RankBytes b = rank0_bytes(plan);
      if (f == Fusion::kNever)
        separate.push_back(Sample{b.pulled, r.median_us});
      else
        fused.push_back(Sample{b.pulled + b.local, r.median_us});
    }
  }
  RESHARD_REQUIRE(
      separate.size() >= 2,
      "calibrate: the nvlink fit needs sizes up to at least 16 MiB (separate copies of 4 and 16 MiB tensors)");
  OneSidedProfile& nv = cal.profile.nvlink;
  Fit s = fit_alpha_beta(separate, "nvlink.copy_engine");
  nv.copy_engine.bandwidth_GBps = s.params.bandwidth_GBps;
  nv.sync_us = std::max(0.0, s.params.alpha_us - nv.copy_engine.alpha_us);  // one engine call per pulled block
  nv.step_overhead_us = smallest(separate);
  Fit f = fit_alpha_beta(fused, "nvlink.fused");
  nv.fused = f.params;
  nv.fused_overhead_us = smallest(fused);
  cal.fits.emplace_back("nvlink.copy_engine", std::move(s));
  cal.fits.emplace_back("nvlink.fused", std::move(f));
  return "nvlink copy_engine bandwidth and sync_us, step_overhead_us, fused and fused_overhead_us fitted from "
         "end-to-end S0->S1 runs on mesh (2) (separate copies against bytes pulled per rank, fused against bytes "
         "pulled and copied); its kernel from the base profile";
}

}  // namespace reshard::detail
