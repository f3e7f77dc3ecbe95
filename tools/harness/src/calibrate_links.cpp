#include "calibrate_links.hpp"

#include <algorithm>
#include <iterator>

#include <nlohmann/json.hpp>

#include "gpu_timing.hpp"
#include "reshard/cuda_check.hpp"
#include "reshard/cuda_device.hpp"
#include "reshard/host_backend.hpp"
#include "reshard/timing.hpp"

namespace reshard::detail {
namespace {

using CommOp = std::function<void(int rank, Communicator& comm, void* a, void* b, size_t bytes, StreamHandle s)>;

// Median time of `op` per size on the slower of the two ranks.
std::vector<Sample> measure(const LinkRanks& ranks, const std::vector<double>& sizes, const CalibrateOptions& o,
                            const CommOp& op, double (*x_of)(double bytes, int n)) {
  size_t max_bytes = 0;
  for (double s : sizes) max_bytes = std::max(max_bytes, static_cast<size_t>(s));
  const int here = static_cast<int>(ranks.comms.size());
  std::vector<std::vector<double>> medians(here);
  run_ranks(here, [&](int i) {
    const int r = ranks.ranks[i], device = ranks.devices[i];
    NcclCommunicator& comm = *ranks.comms[i];
    CudaDevice dev(device);
    CudaStream stream(device);
    auto a = dev.allocate(max_bytes * 2), b = dev.allocate(max_bytes * 2);
    RESHARD_CUDA_CHECK(cudaMemset(a->data(), 1, a->bytes()));
    auto stalled = [&] {
      comm.abort();
      fail(ErrorKind::kTimeout, "calibrate: a measurement made no progress for 120 s; the communicator was aborted");
    };
    for (double size : sizes) {
      const size_t bytes = static_cast<size_t>(size);
      auto once = [&] { op(r, comm, a->data(), b->data(), bytes, stream.handle()); };
      for (int k = 0; k < o.warmup; ++k) once();
      IterationSamples t = time_on_stream(stream.get(), o.iters, once, std::chrono::seconds(120), stalled);
      comm.wait(stream.handle(), std::chrono::seconds(120));
      medians[i].push_back(summarize(t).median_us);
    }
  });
  std::vector<double> slower = medians[0];
  if (here == 1) {  // the other rank is another process: its medians through the communicator
    std::vector<double> both(2 * sizes.size());
    ranks.comms[0]->all_gather_host(slower.data(), both.data(), slower.size() * sizeof(double));
    for (size_t k = 0; k < sizes.size(); ++k) slower[k] = std::max(both[k], both[sizes.size() + k]);
  } else {
    for (size_t k = 0; k < sizes.size(); ++k) slower[k] = std::max(medians[0][k], medians[1][k]);
  }
  std::vector<Sample> out;
  for (size_t k = 0; k < sizes.size(); ++k) out.push_back(Sample{x_of(sizes[k], 2), slower[k]});
  return out;
}

nlohmann::ordered_json fit_json(const Fit& f) {
  nlohmann::ordered_json j;
  if (f.samples.empty()) return j;
  j["alpha_us"] = f.params.alpha_us;
  j["bandwidth_GBps"] = f.params.bandwidth_GBps;
  j["rms_rel_error"] = f.rms_rel_error;
  j["max_rel_error"] = f.max_rel_error;
  j["range_bytes"] = {f.samples.front().x, f.samples.back().x};
  nlohmann::ordered_json pts = nlohmann::ordered_json::array();
  for (size_t i = 0; i < f.samples.size(); ++i) pts.push_back({f.samples[i].x, f.samples[i].us, f.rel_residuals[i]});
  j["samples_bytes_us_residual"] = std::move(pts);
  return j;
}

}  // namespace

double settle_sizes(CalibrateOptions& o) {
  if (o.sizes_bytes.empty())
    for (double s = 4096; s <= double(1 << 30); s *= 4) o.sizes_bytes.push_back(s);
  double largest = 0;
  for (double s : o.sizes_bytes) {
    RESHARD_REQUIRE(s >= 4 && s <= double(Index(1) << 40), "calibrate: size ", s, " bytes is outside 4 B .. 1 TiB");
    largest = std::max(largest, s);
  }
  return largest;
}

void add_fit(Calibration& cal, const std::string& name, AlphaBeta* target, const std::vector<Sample>& samples,
             bool copy) {
  Fit f = fit_alpha_beta(samples, name, copy ? FitError::kAbsolute : FitError::kRelative);
  if (target) {
    *target = f.params;
    for (const Sample& s : copy ? std::vector<Sample>{} : samples)
      if (s.x > 0 && (target->samples.empty() || s.x > target->samples.back().first))
        target->samples.emplace_back(s.x, s.us);
  }
  cal.fits.emplace_back(name, std::move(f));
}

void calibrate_links(const LinkRanks& ranks, const CalibrateOptions& o, LinkProfile& link, const std::string& link_name,
                     Calibration& cal, const std::function<void(const std::string&)>& next) {
  auto one = [](double bytes, int) { return bytes; };
  auto ring = [](double bytes, int n) { return bytes * (n - 1); };                 // all_gather / reduce_scatter chunk
  auto allreduce = [](double bytes, int n) { return 2.0 * (n - 1) / n * bytes; };  // ring all_reduce
  CommOp p2p = [](int r, Communicator& c, void* a, void* b, size_t bytes, StreamHandle s) {
    SendOp so{1 - r, a, bytes};
    RecvOp ro{1 - r, b, bytes};
    c.exchange(std::span<const SendOp>(&so, 1), std::span<const RecvOp>(&ro, 1), s);
  };
  CommOp ag = [](int, Communicator& c, void* a, void* b, size_t bytes, StreamHandle s) {
    c.all_gather(a, b, bytes, s);
  };
  CommOp rs = [](int, Communicator& c, void* a, void* b, size_t bytes, StreamHandle s) {
    c.reduce_scatter(a, b, bytes / 4, DType::kF32, ReduceOp::kSum, s);
  };
  CommOp ar = [](int, Communicator& c, void* a, void* b, size_t bytes, StreamHandle s) {
    c.all_reduce(a, b, bytes / 4, DType::kF32, ReduceOp::kSum, s);
  };
  const std::pair<const char*, AlphaBeta*> ops[] = {{".p2p", &link.p2p},
                                                    {".all_to_all", &link.all_to_all},
                                                    {".all_gather", &link.all_gather},
                                                    {".reduce_scatter", &link.reduce_scatter},
                                                    {".all_reduce", &link.all_reduce}};
  const CommOp* run[] = {&p2p, &p2p, &ag, &rs, &ar};
  double (*const per[])(double bytes, int n) = {one, one, ring, ring, allreduce};
  for (size_t k = 0; k < std::size(ops); ++k) {
    next(link_name + ops[k].first);
    add_fit(cal, link_name + ops[k].first, ops[k].second, measure(ranks, o.sizes_bytes, o, *run[k], per[k]));
  }
}

void record_fits(Calibration& cal) {
  nlohmann::ordered_json fits;
  for (const auto& [name, f] : cal.fits) fits[name] = fit_json(f);
  nlohmann::ordered_json extra;
  extra["machine"] = cal.machine;
  extra["fits"] = std::move(fits);
  cal.profile.extra_json = extra.dump();
}

}  // namespace reshard::detail
