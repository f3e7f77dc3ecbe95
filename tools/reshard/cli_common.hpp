// Shared pieces of the `reshard` subcommands: the layout flags and their conversion to library types.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "reshard/layout.hpp"

namespace reshard::cli {

// Flags every subcommand that names a tensor on a mesh takes.
struct TensorFlags {
  std::string mesh;
  std::string shape;
  std::string ranks;  // optional explicit rank list "3,2,1,0"
};

void add_tensor_flags(CLI::App& cmd, TensorFlags& flags);
Mesh make_mesh(const TensorFlags& flags);
Layout make_layout(const TensorFlags& flags, const std::string& placements);

// Every subcommand is registered by one of these; the callback it sets returns the exit code.
using Command = std::function<int()>;
Command add_layout_command(CLI::App& app);

}  // namespace reshard::cli
