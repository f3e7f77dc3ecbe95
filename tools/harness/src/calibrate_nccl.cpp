// Calibration microbenchmarks on GPUs 0 and 1: the NCCL link operations (calibrate_links.cpp), the batched copy kernel
// (a strided pack) and the copy engines over sizes, each timed like the executor runs (CUDA events between back-to-back
// operations); then the step overhead and the one-sided transport's fields (calibrate_nvlink.cpp) from end-to-end runs.
#include "calibrate_links.hpp"
#include "calibrate_nvlink.hpp"
#include "gpu_timing.hpp"
#include "reshard/calibrate.hpp"
#include "reshard/cuda_check.hpp"
#include "reshard/cuda_device.hpp"
#include "reshard/harness.hpp"
#include "reshard/host_backend.hpp"
#include "reshard/interrupt.hpp"
#include "reshard/memory_check.hpp"
#include "reshard/nccl_communicator.hpp"
#include "reshard/planner.hpp"

namespace reshard {

Calibration calibrate(const CalibrateOptions& in) {
  RESHARD_REQUIRE(cuda_device_count() >= 2, "calibrate needs 2 GPUs; ", cuda_device_count(), " visible");
  CalibrateOptions o = in;
  const double largest = detail::settle_sizes(o);
  // Two buffers of twice the largest size per GPU (all_gather's output); the copy kernel takes three times it.
  const Index need = static_cast<Index>(4 * largest);
  for (int d = 0; d < 2; ++d) {
    Index free = available_device_memory(d);
    RESHARD_REQUIRE(need <= free, "calibrate needs ", need, " bytes on GPU ", d, " for sizes up to ",
                    static_cast<Index>(largest), " bytes but ", free, " are free; give smaller --sizes");
  }
  constexpr int kMeasurements = 9;
  int done = 0;
  auto next = [&](const std::string& what) {
    throw_if_stop_requested();
    if (o.progress) o.progress(what, done++, kMeasurements);
  };
  auto comms = make_local_communicators(2, NcclOptions{});
  Calibration cal;
  cal.profile = o.base;
  const bool inter = o.nccl_link == LinkClass::kInterNode;
  const std::string link_name = inter ? "inter_node" : "intra_node";
  detail::calibrate_links(detail::LinkRanks{{comms[0].get(), comms[1].get()}, {0, 1}, {0, 1}}, o,
                          inter ? cal.profile.inter_node : cal.profile.intra_node, link_name, cal, next);

  // Local copies: the copy kernel on a strided pack, half the columns of a square matrix (rows of the sweep's S0->S1
  // packs), and the copy engines on one contiguous block (what a local step copies where rows are wide).
  {
    CudaDevice dev(0);
    CudaStream stream(0);
    size_t max_bytes = static_cast<size_t>(o.sizes_bytes.back());
    auto src = dev.allocate(2 * max_bytes), dst = dev.allocate(max_bytes);
    const BufferBases bases{src->data(), nullptr, dst->data()};
    // The median time of copying `region` (f32) on `engine`.
    auto median_us = [&](const CopyRegion& region, CopyEngine engine) {
      auto batch = dev.prepare_copies(Copies{{region}, engine}, 4);
      auto once = [&] { batch->run(bases, stream.handle()); };
      for (int i = 0; i < o.warmup; ++i) once();
      IterationSamples t = detail::time_on_stream(stream.get(), o.iters, once, std::chrono::seconds(120), [] {
        fail(ErrorKind::kTimeout, "calibrate: a local copy made no progress for 120 s");
      });
      stream.synchronize();
      return summarize(t).median_us;
    };
    next("copy");
    std::vector<Sample> packs, contiguous;
    for (double size : o.sizes_bytes) {
      Index elems = static_cast<Index>(size) / 4;
      Index rows = 1;
      while (rows * rows * 2 < elems) rows *= 2;  // rows x (2 rows) f32 source; copy rows x rows
      Index cols = elems / rows;
      const CopyRegion region{BufferRef{Buffer::kInput, cols / 2}, BufferRef{Buffer::kWork, 0}, Dims{rows, cols / 2},
                              Dims{cols, 1}, Dims{cols / 2, 1}};
      packs.push_back(Sample{static_cast<double>(rows * (cols / 2) * 4), median_us(region, CopyEngine::kKernel)});
    }
    detail::add_fit(cal, "copy", &cal.profile.copy, packs, true);
    next("copy_engine");
    for (double size : o.sizes_bytes) {
      const Index elems = static_cast<Index>(size) / 4;
      const CopyRegion region{BufferRef{Buffer::kInput, 0}, BufferRef{Buffer::kWork, 0}, Dims{elems}, Dims{1}, Dims{1}};
      contiguous.push_back(Sample{static_cast<double>(elems * 4), median_us(region, CopyEngine::kCopyEngine)});
    }
    detail::add_fit(cal, "copy_engine", &cal.profile.copy_engine, contiguous, true);
  }

  next("step_overhead");
  // The executor's fixed cost per communicating NCCL step: small end-to-end runs (p2p, all_gather), whose GPU work
  // is far shorter than the host work that issues it.
  {
    comms.clear();  // the runner makes its own communicators
    LocalRunner runner(Backend::kNccl, 2);
    cal.profile.step_overhead_us = 0;
    std::vector<Sample> excess;
    struct Case {
      const char* from;
      const char* to;
      Strategy strategy;
    };
    // Communicating steps only: a local step pays its copy and no step overhead.
    for (Case c :
         {Case{"S0", "S1", Strategy::kP2P}, Case{"S0", "R", Strategy::kCollective}, Case{"S1", "S0", Strategy::kP2P}}) {
      for (Dims shape : {Dims{64, 64}, Dims{256, 256}}) {
        Layout src(Mesh({2}), parse_placements(c.from), shape);
        PlanOptions po;
        po.profile = cal.profile;
        po.strategy = c.strategy;
        po.transport = Transport::kNccl;  // NCCL's steps (auto would put these p2p steps on nvlink, priced apart)
        Plan plan = make_plan(src, src.with_placements(parse_placements(c.to)), DType::kF32, po);
        RunOptions ro;
        ro.iters = 50;
        ro.warmup = 5;
        RunResult r = runner.run(plan, ro);
        // With no overhead in the profile the estimate is the GPU time; the host work per step is what the measured
        // run takes beyond it (the model then takes the larger of the two).
        double per_step = r.median_us / static_cast<double>(plan.steps().size());
        excess.push_back(Sample{static_cast<double>(volume(whole(shape)) * 4), per_step});
      }
    }
    std::vector<double> v;
    for (const Sample& s : excess) v.push_back(s.us);
    cal.profile.step_overhead_us = std::max(0.0, median(v));
    Fit f;
    f.params = AlphaBeta{cal.profile.step_overhead_us, 1};
    f.samples = excess;
    for (const Sample& s : excess) f.rel_residuals.push_back(s.us - cal.profile.step_overhead_us);
    cal.fits.emplace_back("step_overhead", std::move(f));
  }

  next("nvlink");
  const std::string nvlink = detail::calibrate_nvlink(cal, o);

  cudaDeviceProp prop{};
  RESHARD_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  cal.machine = cat(cuda_device_count(), "x ", prop.name, ", NCCL ", nccl_version());
  cal.profile.name = "calibrated: " + cal.machine;
  cal.profile.source = "reshard calibrate on " + cal.machine + ": " + link_name +
                       " links fitted by weighted least squares (relative error)" +
                       (inter ? " with NCCL on its network path between two local GPUs" : "") +
                       ", copy and copy_engine by least squares (absolute error), over " +
                       std::to_string(o.sizes_bytes.size()) + " sizes; " + nvlink + "; " +
                       (inter ? "intra_node" : "inter_node") + " and p2p_per_peer_us from the base profile (" +
                       o.base.name + ")";
  detail::record_fits(cal);
  return cal;
}

}  // namespace reshard
