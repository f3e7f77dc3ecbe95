// reshard calibrate: fit the cost model's alpha and beta from measurements on the local GPUs and write a profile.
#include <fmt/format.h>

#include "cli_common.hpp"
#include "cli_output.hpp"
#include "reshard/calibrate.hpp"
#include "reshard/text.hpp"

namespace reshard::cli {

Command add_calibrate_command(CLI::App& app) {
  struct Flags {
    std::string out, sizes, base;
    int iters = 20;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd =
      app.add_subcommand("calibrate", "Fit the cost model's alpha and beta from measurements on the local GPUs");
  cmd->add_option("--out", f->out, "Write the profile JSON here")->required();
  cmd->add_option("--sizes", f->sizes, "Sizes, comma-separated (default 4KiB..1GiB in x4 steps)");
  cmd->add_option("--iters", f->iters, "Timed repetitions per size")->capture_default_str();
  cmd->add_option("--base", f->base, "Profile for what cannot be measured here (default: the built-in one)");
  return [f] {
    RESHARD_REQUIRE(f->iters >= 1, "--iters must be >= 1, got ", f->iters);
    CalibrateOptions o;
    o.iters = f->iters;
    if (!f->base.empty()) o.base = load_profile(f->base);
    for (std::string_view size : f->sizes.empty() ? std::vector<std::string_view>{} : split(f->sizes, ','))
      o.sizes_bytes.push_back(static_cast<double>(parse_bytes("--sizes", std::string(size))));
    // The profile is written at the end; a path that cannot be written fails now, before minutes of measuring.
    check_writable(f->out, "--out");
    o.progress = [](const std::string& what, int done, int total) {
      fmt::print(stderr, "[{}/{}] measuring {}\n", done + 1, total, what);
      std::fflush(stderr);
    };
    Calibration cal = calibrate(o);
    Output out = Output::open(f->out, "--out");
    out.write(profile_to_json(cal.profile));
    out.flush();
    Output screen = Output::standard();
    screen.write(fmt::format("# calibrated on {}\n", cal.machine));
    for (const auto& [name, fit] : cal.fits)
      screen.write(fmt::format(
          "  {}: alpha {:.3g} us, bandwidth {:.4g} GB/s, rms relative error {:.1f}%, max {:.1f}%\n", name,
          fit.params.alpha_us, fit.params.bandwidth_GBps, 100 * fit.rms_rel_error, 100 * fit.max_rel_error));
    screen.write(fmt::format("# wrote {}\n", f->out));
    return 0;
  };
}

}  // namespace reshard::cli
