// reshard layout: every rank's local shard of a tensor on a mesh, as PyTorch DTensor computes it.
#include <fmt/format.h>

#include "cli_common.hpp"
#include "cli_output.hpp"
#include "reshard/layout_format.hpp"
#include "reshard/plan_format.hpp"

namespace reshard::cli {
namespace {

// JSON larger than this is refused with a hint instead of printed (about a million ranks).
constexpr Index kMaxJsonBytes = Index(256) << 20;

}  // namespace

Command add_layout_command(CLI::App& app) {
  struct Flags {
    TensorFlags tensor;
    std::string placements;
    JsonFlag json;
    long long rank = -1;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("layout", "Show each rank's local shape and global offset (table, picture, JSON)");
  add_tensor_flags(*cmd, flags->tensor);
  cmd->add_option("--placements", flags->placements, "One placement per mesh dim: R, S<d>, P, P(avg|max|min)")
      ->required();
  add_json_flag(*cmd, flags->json, "The layout in the conformance fixture's format (plus rank)");
  cmd->add_option("--rank", flags->rank, "Show this rank only");
  return [flags, cmd] {
    Layout layout = make_layout(flags->tensor, flags->placements);
    std::optional<int> rank;
    if (cmd->count("--rank")) rank = check_rank("--rank", flags->rank, layout.mesh());
    // The JSON goes to standard output or to its file; the table and picture to standard output unless the JSON
    // took it (as `plan`, `run` and `bench` do).
    bool json_to_stdout = false;
    if (flags->json.given()) {
      if (!rank) {
        Index bytes = layout_json_bytes_estimate(layout);
        RESHARD_REQUIRE(bytes <= kMaxJsonBytes, "--json: the layout of ", layout.mesh().size(),
                        " ranks would print about ", human_bytes(static_cast<double>(bytes)), " (the limit is ",
                        human_bytes(static_cast<double>(kMaxJsonBytes)), "); give --rank R for one rank");
      }
      Output out = Output::open(flags->json.path(), "--json");
      json_to_stdout = out.is_stdout();
      write_layout_json(
          layout, [&](std::string_view piece) { out.write(piece); }, rank);
      out.write("\n");
      out.flush();
    }
    if (json_to_stdout) return 0;
    Output out = Output::standard();
    out.write(layout_table(layout, rank));
    out.write("\n");
    out.write(rank ? "" : layout_picture(layout));
    return 0;
  };
}

}  // namespace reshard::cli
