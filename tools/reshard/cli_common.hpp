// Shared pieces of the `reshard` subcommands: the layout flags and their conversion to library types.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "reshard/layout.hpp"
#include "reshard/planner.hpp"

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

// Flags of subcommands that plan a redistribution (plan, run).
struct PlanFlags {
  TensorFlags tensor;
  std::string from, to;
  std::string dtype = "f32";
  std::string strategy = "auto";
  std::string transport = "auto";
  std::string fuse = "auto";
  int ranks_per_node = 8;
  std::string profile;
  std::string memory_budget;
  int max_collectives = -1;
  std::string pipeline_chunk;
};

struct PlanRequest {
  Layout src, dst;
  DType dtype;
  PlanOptions options;
};

void add_plan_flags(CLI::App& cmd, PlanFlags& flags);
PlanRequest make_plan_request(const PlanFlags& flags);

// "1048576", "64MiB", "2GiB", "512KiB": bytes; kParse naming the flag otherwise.
Index parse_bytes(const std::string& flag, const std::string& text);

// Every subcommand is registered by one of these; the callback it sets returns the exit code.
using Command = std::function<int()>;
Command add_layout_command(CLI::App& app);
Command add_plan_command(CLI::App& app);
Command add_run_command(CLI::App& app);
Command add_bench_command(CLI::App& app);
Command add_calibrate_command(CLI::App& app);

}  // namespace reshard::cli
