// The one-sided transport's part of calibrate() (calibrate_nvlink.cpp).
#pragma once

#include <string>

#include "reshard/calibrate.hpp"

namespace reshard::detail {

// Fits cal.profile.nvlink's copy-engine bandwidth, sync_us, step_overhead_us, fused line and fused_overhead_us from
// verified end-to-end runs on GPUs 0 and 1 (sizes up to the largest of o.sizes_bytes, at most 256 MiB) and adds the
// fits to cal.fits. Returns a sentence for the profile's source: what was fitted, or why nothing was (no peer access).
std::string calibrate_nvlink(Calibration& cal, const CalibrateOptions& o);

}  // namespace reshard::detail
