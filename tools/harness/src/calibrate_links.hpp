// Calibration's NCCL link measurements (internal to the harness): send/recv, all_to_all (grouped send/recv),
// all_gather, reduce_scatter and all_reduce between two ranks over sizes, each fitted into a profile link.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "reshard/calibrate.hpp"
#include "reshard/nccl_communicator.hpp"

namespace reshard::detail {

// This process's ranks of the two measured: both (two local GPUs, a thread each) or one (one process per node).
struct LinkRanks {
  std::vector<NcclCommunicator*> comms;
  std::vector<int> ranks;    // 0 or 1
  std::vector<int> devices;  // the rank's GPU
};

// Fills in the default sizes (4 KiB to 1 GiB in x4 steps) and checks each (4 B .. 1 TiB); returns the largest.
double settle_sizes(CalibrateOptions& o);

// Fits `samples` into `target` (null: recorded only) and records the fit in cal.fits under `name`. Link operations
// keep their samples for interpolation (NCCL's protocols bend the times away from one line); `copy` fits keep a line on
// absolute error: the planner prices copies per rank and candidate, where interpolating made planning a third slower,
// and a line through the large sizes prices them within 2%, where a relative fit is pulled by the sizes a
// back-to-back copy keeps in the L2 and prices large copies a sixth too cheap.
void add_fit(Calibration& cal, const std::string& name, AlphaBeta* target, const std::vector<Sample>& samples,
             bool copy = false);

// Measures the five operations (each timed as the executor runs it: CUDA events between back-to-back operations, the
// slower rank's median per size; with one rank here, the other process's medians through all_gather_host) and fits
// them into `link`, named `link_name` + ".p2p" and so on; `next(name)` is called before each.
void calibrate_links(const LinkRanks& ranks, const CalibrateOptions& o, LinkProfile& link, const std::string& link_name,
                     Calibration& cal, const std::function<void(const std::string&)>& next);

// Records cal.machine and every fit of cal.fits (alpha, bandwidth, errors, samples with residuals) in the profile's
// extra JSON, which the planner keeps as text.
void record_fits(Calibration& cal);

}  // namespace reshard::detail
