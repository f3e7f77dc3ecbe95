// reshard calibrate: fit the cost model's alpha and beta from measurements on the local GPUs and write a profile.
#include <fmt/format.h>

#include "calibrate_mapping.hpp"
#include "cli_common.hpp"
#include "cli_output.hpp"
#include "reshard/calibrate.hpp"
#include "reshard/text.hpp"

namespace reshard::cli {

Command add_calibrate_command(CLI::App& app) {
  struct Flags {
    std::string out, sizes, base, nccl_link = "intra_node", rendezvous;
    int iters = 20;
    bool no_mapping = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd =
      app.add_subcommand("calibrate", "Fit the cost model's alpha and beta from measurements on the local GPUs");
  cmd->add_option("--out", f->out, "Write the profile JSON here")->required();
  cmd->add_option("--sizes", f->sizes, "Sizes, comma-separated (default 4KiB..1GiB in x4 steps)");
  cmd->add_option("--iters", f->iters, "Timed repetitions per size")->capture_default_str();
  cmd->add_option("--base", f->base, "Profile for what cannot be measured here (default: the built-in one)");
  cmd->add_option("--nccl-link", f->nccl_link,
                  "The profile link NCCL's measurements go to: intra_node, or inter_node with NCCL on its network path "
                  "(run under NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1)")
      ->capture_default_str();
  cmd->add_option("--rendezvous", f->rendezvous, kRendezvousHelp);
  cmd->add_flag("--no-mapping", f->no_mapping,
                "Skip the mapping costs (nvlink map_us, first_map_us: `reshard run` started once per GPU with "
                "--buffers same, cached and new)");
  return [f] {
    RESHARD_REQUIRE(f->iters >= 1, "--iters must be >= 1, got ", f->iters);
    RESHARD_REQUIRE(f->nccl_link == "intra_node" || f->nccl_link == "inter_node",
                    "--nccl-link must be intra_node or inter_node, got '", printable(f->nccl_link), "'");
    CalibrateOptions o;
    o.iters = f->iters;
    o.nccl_link = f->nccl_link == "inter_node" ? LinkClass::kInterNode : LinkClass::kIntraNode;
    if (!f->base.empty()) o.base = load_profile(f->base);
    for (std::string_view size : f->sizes.empty() ? std::vector<std::string_view>{} : split(f->sizes, ','))
      o.sizes_bytes.push_back(static_cast<double>(parse_bytes("--sizes", std::string(size))));
    o.progress = [](const std::string& what, int done, int total) {
      fmt::print(stderr, "[{}/{}] measuring {}\n", done + 1, total, what);
      std::fflush(stderr);
    };
    // Under a launcher (WORLD_SIZE, RANK): one process per node, two of them, measuring the link between the nodes.
    const LaunchEnvironment env = launch_environment();
    const bool between = env.world_size > 1 || !f->rendezvous.empty();
    Calibration cal;
    if (between) {
      RESHARD_REQUIRE(env.world_size == 2,
                      "calibrate between processes runs as two processes, one per node; "
                      "WORLD_SIZE is ",
                      env.world_size);
      RESHARD_REQUIRE(f->nccl_link == "inter_node",
                      "calibrate between processes measures the link between their "
                      "nodes: give --nccl-link inter_node");
      const std::optional<ProcessPlace> place = process_place(f->rendezvous, "nccl", "calibrate");  // set: 2 ranks
      if (env.rank == 0) check_writable(f->out, "--out");
      cal = calibrate_between_processes(o, env.rank, env.local_rank, place->rendezvous);
      if (env.rank != 0) {
        Output::standard().write(fmt::format("# rank {}: measured with rank 0, which writes the profile\n", env.rank));
        return 0;
      }
    } else {
      // The profile is written at the end; a path that cannot be written fails now, before minutes of measuring.
      check_writable(f->out, "--out");
      cal = calibrate(o);
      if (!f->no_mapping && cal.peer_access) {
        fmt::print(stderr, "[mapping] measuring changing buffers, one process per GPU\n");
        cal.profile.source += "; " + calibrate_mapping(cal.profile, f->iters, 300);
      } else {
        cal.profile.source += !f->no_mapping ? "; nvlink map_us and first_map_us from the base profile (no peer access)"
                                             : "; nvlink map_us and first_map_us from the base profile (--no-mapping)";
      }
    }
    Output out = Output::open(f->out, "--out");
    out.write(profile_to_json(cal.profile));
    out.flush();
    Output screen = Output::standard();
    screen.write(fmt::format("# calibrated {} {}\n", between ? "between" : "on", cal.machine));
    for (const auto& [name, fit] : cal.fits)
      screen.write(fmt::format(
          "  {}: alpha {:.3g} us, bandwidth {:.4g} GB/s, rms relative error {:.1f}%, max {:.1f}%\n", name,
          fit.params.alpha_us, fit.params.bandwidth_GBps, 100 * fit.rms_rel_error, 100 * fit.max_rel_error));
    screen.write(fmt::format("# wrote {}\n", f->out));
    return 0;
  };
}

}  // namespace reshard::cli
