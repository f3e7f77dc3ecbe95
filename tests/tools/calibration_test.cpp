// Calibration's fit and the profile's measured curves (no GPU needed).
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "reshard/calibrate.hpp"
#include "reshard/error.hpp"

namespace reshard {
namespace {

TEST(Fit, RecoversAlphaAndBandwidthFromExactData) {
  std::vector<Sample> s;
  for (double x = 4096; x <= double(1 << 30); x *= 4) s.push_back(Sample{x, 10.0 + x / (300.0 * 1e3)});
  Fit f = fit_alpha_beta(s, "test");
  EXPECT_NEAR(f.params.alpha_us, 10.0, 1e-6);
  EXPECT_NEAR(f.params.bandwidth_GBps, 300.0, 1e-6);
  EXPECT_LT(f.rms_rel_error, 1e-9);
  ASSERT_EQ(f.rel_residuals.size(), s.size());
}

TEST(Fit, RelativeWeightingKeepsSmallSizesAccurate) {
  // Two regimes (a latency floor and a bandwidth line): the relative fit keeps every point within 40%.
  std::vector<Sample> s{{4096, 12}, {65536, 13}, {1 << 20, 16}, {16 << 20, 70}, {256 << 20, 900}, {1 << 30, 3500}};
  Fit f = fit_alpha_beta(s, "test");
  EXPECT_LT(f.max_rel_error, 0.4);
  EXPECT_GT(f.params.alpha_us, 5);
}

TEST(Fit, AbsoluteErrorFollowsTheLargeSizes) {
  // A copy repeated back to back: the middle sizes run from the L2 (fast), the large ones at the memory's bandwidth
  // (1500 GB/s here). The absolute fit prices the large ones within 1%; the relative one, pulled by the cached sizes,
  // underprices them.
  std::vector<Sample> s;
  for (double x = 4096; x <= double(1 << 30); x *= 4) {
    const double memory = 5.0 + x / 1.5e6;
    s.push_back(Sample{x, x >= (64 << 20) ? memory : std::min(memory, 6.0 + x / 4.0e6)});
  }
  const Fit absolute = fit_alpha_beta(s, "copy", FitError::kAbsolute);
  const Fit relative = fit_alpha_beta(s, "copy", FitError::kRelative);
  for (double x : {double(256 << 20), double(1 << 30)}) {
    const double measured = 5.0 + x / 1.5e6;
    EXPECT_NEAR(absolute.params.time_us(x), measured, 0.01 * measured) << x;
    EXPECT_LT(relative.params.time_us(x), 0.95 * measured) << x;
  }
  EXPECT_THROW(fit_alpha_beta({{4096, 20}, {1 << 20, 10}}, "shrinking", FitError::kAbsolute), Error);
}

TEST(Fit, RefusesUnusableData) {
  EXPECT_THROW(fit_alpha_beta({{4096, 10}}, "one point"), Error);
  EXPECT_THROW(fit_alpha_beta({{4096, 10}, {8192, -1}}, "negative time"), Error);
  EXPECT_THROW(fit_alpha_beta({{4096, 20}, {1 << 20, 10}}, "shrinking"), Error);
}

TEST(ProfileCurve, InterpolatesBetweenSamplesAndExtendsByBandwidth) {
  AlphaBeta ab{10, 100, {{1000, 12}, {100000, 30}}};
  EXPECT_DOUBLE_EQ(ab.time_us(500), 12);                         // below: the first point
  EXPECT_NEAR(ab.time_us(10000), std::sqrt(12.0 * 30.0), 1e-9);  // log-log midpoint
  EXPECT_DOUBLE_EQ(ab.time_us(100000 + 1e6), 30 + 1e6 / (100 * 1e3));
  AlphaBeta line{10, 100, {}};
  EXPECT_DOUBLE_EQ(line.time_us(1e6), 10 + 10);
}

TEST(ProfileCurve, BadSamplesAreRefused) {
  nlohmann::json j = nlohmann::json::parse(profile_to_json(default_profile()));
  j["intra_node"]["p2p"]["samples"] = {{1000, 5}, {500, 6}};
  EXPECT_THROW(profile_from_json(j.dump()), Error);
  j["intra_node"]["p2p"]["samples"] = {{1000, -5}};
  try {
    profile_from_json(j.dump());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("intra_node.p2p.samples[0]"), std::string::npos) << e.what();
  }
  j["intra_node"]["p2p"]["samples"] = {{1000, 5}, {2000, 6}};
  Profile p = profile_from_json(j.dump());
  EXPECT_EQ(p.intra_node.p2p.samples.size(), 2u);
  EXPECT_EQ(profile_to_json(profile_from_json(profile_to_json(p))), profile_to_json(p));
}

}  // namespace
}  // namespace reshard
