// reshard layout: every rank's local shard of a tensor on a mesh, as PyTorch DTensor computes it.
#include <iostream>

#include "cli_common.hpp"
#include "reshard/layout_format.hpp"

namespace reshard::cli {

Command add_layout_command(CLI::App& app) {
  struct Flags {
    TensorFlags tensor;
    std::string placements;
    bool json = false;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("layout", "Show each rank's local shape and global offset (table, picture, JSON)");
  add_tensor_flags(*cmd, flags->tensor);
  cmd->add_option("--placements", flags->placements, "One placement per mesh dim: R, S<d>, P, P(avg|max|min)")
      ->required();
  cmd->add_flag("--json", flags->json, "Print JSON in the conformance fixture's format (plus rank)");
  return [flags] {
    Layout layout = make_layout(flags->tensor, flags->placements);
    if (flags->json) {
      std::cout << layout_json(layout) << "\n";
    } else {
      std::cout << layout_table(layout) << "\n" << layout_picture(layout);
    }
    return 0;
  };
}

}  // namespace reshard::cli
