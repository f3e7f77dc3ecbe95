// Calibration of the link between two processes, one per node, as launchers start them: NCCL between the two takes
// the path it takes between nodes, so its fits are the profile's inter_node link; everything else comes from the base.
#include <unistd.h>

#include <cstring>

#include "calibrate_links.hpp"
#include "reshard/calibrate.hpp"
#include "reshard/cuda_check.hpp"
#include "reshard/interrupt.hpp"
#include "reshard/memory_check.hpp"
#include "reshard/text.hpp"

namespace reshard {
namespace {

constexpr size_t kPlaceText = 160;  // "host (GPU name)" of one process, NUL-padded

std::string place_text(int device) {
  char host[64] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "?");
  cudaDeviceProp prop{};
  RESHARD_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  std::string s = cat(host, " (GPU ", device, ": ", prop.name, ")");
  s.resize(std::min(s.size(), kPlaceText - 1));
  return s;
}

}  // namespace

Calibration calibrate_between_processes(const CalibrateOptions& in, int rank, int device,
                                        const std::string& rendezvous) {
  RESHARD_REQUIRE(rank == 0 || rank == 1, "calibrate between processes: rank ", rank, " of 2");
  CalibrateOptions o = in;
  const double largest = detail::settle_sizes(o);
  const Index need = static_cast<Index>(4 * largest);  // two buffers of twice the largest size (all_gather's output)
  const Index free = available_device_memory(device);
  RESHARD_REQUIRE(need <= free, "calibrate needs ", need, " bytes on GPU ", device, " for sizes up to ",
                  static_cast<Index>(largest), " bytes but ", free, " are free; give smaller --sizes");
  int done = 0;
  auto next = [&](const std::string& what) {
    throw_if_stop_requested();
    if (o.progress) o.progress(what, done++, 5);
  };
  std::unique_ptr<NcclCommunicator> comm = make_process_communicator(rank, 2, device, rendezvous, NcclOptions{});
  Calibration cal;
  cal.profile = o.base;
  detail::calibrate_links(detail::LinkRanks{{comm.get()}, {rank}, {device}}, o, cal.profile.inter_node, "inter_node",
                          cal, next);
  // Where the two processes ran, from each of them.
  std::string mine = place_text(device);
  mine.resize(kPlaceText, '\0');
  std::string both(2 * kPlaceText, '\0');
  comm->all_gather_host(mine.data(), both.data(), kPlaceText);
  const std::string first = both.substr(0, kPlaceText).c_str(), second = both.substr(kPlaceText).c_str();
  cal.machine = cat(first, " <-> ", second, ", NCCL ", nccl_version());
  const bool one_host = first.substr(0, first.find(" (")) == second.substr(0, second.find(" ("));
  cal.profile.name = "calibrated between processes: " + cal.machine;
  cal.profile.source =
      "reshard calibrate between two processes (" + cal.machine +
      "): inter_node links fitted by weighted least squares (relative error) over " +
      std::to_string(o.sizes_bytes.size()) + " sizes" +
      (one_host ? "; both processes on one host: the path NCCL takes between them there (its network path under "
                  "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1, or with an NCCL_HOSTID of its own per process)"
                : "") +
      "; everything else from the base profile (" + o.base.name + ")";
  detail::record_fits(cal);
  return cal;
}

}  // namespace reshard
