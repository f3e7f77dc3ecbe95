#include <Eigen/Dense>
#include <cmath>

#include "reshard/calibrate.hpp"
#include "reshard/error.hpp"

namespace reshard {

Fit fit_alpha_beta(const std::vector<Sample>& samples, const std::string& what, FitError error) {
  RESHARD_REQUIRE(samples.size() >= 2, "fitting ", what, " needs at least 2 samples, got ", samples.size());
  const Eigen::Index n = static_cast<Eigen::Index>(samples.size());
  Eigen::MatrixXd a(n, 2);
  Eigen::VectorXd b(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const Sample& s = samples[i];
    RESHARD_REQUIRE(s.us > 0 && s.x >= 0, "fitting ", what, ": sample ", i, " has time ", s.us, " us for ", s.x,
                    " bytes");
    const double w = error == FitError::kRelative ? 1.0 / s.us : 1.0;
    a(i, 0) = w;
    a(i, 1) = s.x * w;
    b(i) = s.us * w;
  }
  Eigen::Vector2d coef = a.colPivHouseholderQr().solve(b);  // [alpha_us, us per byte]
  double alpha = coef(0), slope = coef(1);
  if (alpha < 0) {  // clamp the latency at 0 and refit the slope alone
    alpha = 0;
    slope = a.col(1).dot(b) / a.col(1).squaredNorm();
  }
  RESHARD_REQUIRE(slope > 0, "fitting ", what, ": the time does not grow with the size (slope ", slope,
                  " us/byte); the measurements are unusable");
  Fit f;
  f.params = AlphaBeta{alpha, 1.0 / (slope * 1e3)};
  f.samples = samples;
  double sq = 0;
  for (const Sample& s : samples) {
    double model = f.params.time_us(s.x);
    double r = (model - s.us) / s.us;
    f.rel_residuals.push_back(r);
    sq += r * r;
    f.max_rel_error = std::max(f.max_rel_error, std::abs(r));
  }
  f.rms_rel_error = std::sqrt(sq / samples.size());
  return f;
}

}  // namespace reshard
