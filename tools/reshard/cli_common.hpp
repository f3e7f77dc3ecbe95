// Shared pieces of the `reshard` subcommands: the layout and plan flags and their conversion to library types, the
// launcher's environment, and the registry of commands.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "reshard/layout.hpp"
#include "reshard/planner.hpp"

namespace reshard::cli {

// Flags every subcommand that names a tensor on a mesh takes.
struct TensorFlags {
  std::string mesh;
  std::string shape;
  std::string ranks;  // optional explicit rank list "3,2,1,0"
};

// `required`: the flags must be given (layout); otherwise they may be left out where a plan file supplies them.
void add_tensor_flags(CLI::App& cmd, TensorFlags& flags, bool required = true);
Mesh make_mesh(const TensorFlags& flags);
Layout make_layout(const TensorFlags& flags, const std::string& placements);

// Flags of subcommands that plan a redistribution (plan, run).
struct PlanFlags {
  TensorFlags tensor;
  std::string from, to;
  // Source and target on different meshes of one world: each side's mesh shape and world ranks (default: --mesh
  // and --ranks), and the world size (default: one more than the largest rank of either side).
  std::string from_mesh, from_ranks, to_mesh, to_ranks;
  int world_size = -1;
  std::string dtype = "f32";
  std::string to_dtype;  // empty: the target has --dtype
  // The plan options given, by name (plan_option_table.hpp), as their text: set on the request in make_plan_request.
  std::map<std::string, std::string> options;
};

// Adds the plan flags; --mesh, --shape, --from and --to are checked by make_plan_request (they are optional when a
// plan file is given instead).
void add_plan_flags(CLI::App& cmd, PlanFlags& flags);
// One flag per row of the plan option table (plan_option_table.hpp) but those named in `except`, recorded into
// `options` by name.
void add_plan_option_flags(CLI::App& cmd, std::map<std::string, std::string>& options,
                           std::initializer_list<std::string_view> except = {});
// Sets every option in `given` on `options` (through the table).
void apply_plan_options(const std::map<std::string, std::string>& given, PlanOptions& options);
// Adds --from-mesh, --from-ranks, --to-mesh, --to-ranks and --world-size (part of the plan flags; also bench's).
void add_mesh_pair_flags(CLI::App& cmd, PlanFlags& flags);
// Whether any of those flags was given.
bool cross_mesh_flags(const CLI::App& cmd);
PlanRequest make_plan_request(const CLI::App& cmd, const PlanFlags& flags);
// The source and target meshes the flags name: --mesh (and --ranks) for both, or per side --from-mesh/--from-ranks and
// --to-mesh/--to-ranks in a world of --world-size ranks. kParse or kInvalidArgument naming the flag otherwise.
std::pair<Mesh, Mesh> make_meshes(const CLI::App& cmd, const PlanFlags& flags);
// Loads a plan file and checks it against the flags given with it: the layout flags, when given, must match the
// plan's; the flags that only shape a new plan (--strategy, --profile, ...) are refused.
Plan load_plan_for(const CLI::App& cmd, const PlanFlags& flags, const std::string& path, const char* file_flag);

// "1048576", "64MiB", "2GiB", "512KiB": bytes; kParse naming the flag otherwise.
Index parse_bytes(const std::string& flag, const std::string& text);

// A rank given on the command line: kInvalidArgument "rank R is not in mesh M" unless 0 <= R < the mesh's world
// size.
int check_rank(const char* flag, long long rank, const Mesh& mesh);

// The launcher's environment (torchrun, mpirun): WORLD_SIZE, RANK, LOCAL_RANK, MASTER_ADDR, MASTER_PORT.
struct LaunchEnvironment {
  int world_size = 1;
  int rank = 0;
  int local_rank = 0;
  bool set = false;        // WORLD_SIZE or RANK present
  std::string rendezvous;  // tcp:MASTER_ADDR:MASTER_PORT+1 when both are set
};
// kInvalidArgument naming the variable for a value that is empty, not a whole number or out of range.
LaunchEnvironment launch_environment();

// --rendezvous's help (run and bench).
inline constexpr const char* kRendezvousHelp =
    "One process per rank (RANK, WORLD_SIZE, LOCAL_RANK from the launcher): file:PATH or tcp:HOST:PORT (default with "
    "MASTER_ADDR/MASTER_PORT set: tcp:MASTER_ADDR:MASTER_PORT+1)";

// This process's place in a job of one process per rank: a launcher's WORLD_SIZE > 1 or `rendezvous_flag` given.
struct ProcessPlace {
  LaunchEnvironment env;
  std::string rendezvous;  // the flag, else the launcher's
};
// nullopt when every rank runs in this process. Checked: the nccl backend (`backend_flag` not "host"), a GPU for
// LOCAL_RANK and a rendezvous; kInvalidArgument naming what is missing. `command` names the subcommand in messages.
std::optional<ProcessPlace> process_place(const std::string& rendezvous_flag, const std::string& backend_flag,
                                          const char* command);

// Every subcommand is registered by one of these; the callback it sets returns the exit code.
using Command = std::function<int()>;
Command add_layout_command(CLI::App& app);
Command add_plan_command(CLI::App& app);
Command add_run_command(CLI::App& app);
Command add_bench_command(CLI::App& app);
Command add_calibrate_command(CLI::App& app);
Command add_contention_command(CLI::App& app);

}  // namespace reshard::cli
