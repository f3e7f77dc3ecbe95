#include "cli_common.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <limits>

#include "reshard/harness.hpp"
#include "reshard/plan_json.hpp"
#include "reshard/plan_option_table.hpp"
#include "reshard/rendezvous.hpp"
#include "reshard/text.hpp"
#include "reshard/tools_text.hpp"

namespace reshard::cli {
namespace {

void require_flag(const CLI::App& cmd, const std::string& value, const char* flag, const char* alternative) {
  if (value.empty() && cmd.count(flag) == 0) {
    if (alternative)
      fail(ErrorKind::kInvalidArgument, cat(flag, " is required (or give a plan file with ", alternative, ")"));
    fail(ErrorKind::kInvalidArgument, cat(flag, " is required"));
  }
}

int env_int(const char* name, int fallback, int min, int max, bool& present) {
  const char* v = std::getenv(name);
  if (!v) return fallback;
  present = true;
  RESHARD_REQUIRE(*v, "environment variable ", name, " is set but empty");
  bool overflow = false;
  std::optional<long long> parsed = parse_integer(v, &overflow);
  RESHARD_REQUIRE(parsed, "environment variable ", name, "='", printable(v), "' ",
                  overflow ? "does not fit in 64 bits" : "is not a whole number");
  RESHARD_REQUIRE(*parsed >= min && *parsed <= max, "environment variable ", name, "=", *parsed, " is out of range (",
                  min, "..", max, ")");
  return static_cast<int>(*parsed);
}

// One side's mesh shape and rank list: its own flags, else --mesh and --ranks.
std::pair<std::vector<int>, std::vector<int>> side_mesh(const PlanFlags& flags, const std::string& mesh_text,
                                                        const std::string& ranks_text, const char* mesh_flag,
                                                        const char* ranks_flag) {
  RESHARD_REQUIRE(!mesh_text.empty() || !flags.tensor.mesh.empty(), mesh_flag, " (or --mesh) is required");
  const std::vector<int> shape = parse_mesh_shape(mesh_text.empty() ? flags.tensor.mesh : mesh_text);
  std::vector<int> ranks;
  if (!ranks_text.empty()) {
    try {
      ranks = parse_rank_list(ranks_text);
    } catch (const Error& e) {
      fail(e.kind(), cat(ranks_flag, ": ", e.what()));
    }
  } else if (mesh_text.empty() && !flags.tensor.ranks.empty()) {
    ranks = make_mesh(flags.tensor).ranks();
  } else {
    Index n = 1;
    for (int d : shape) n *= d;  // parse_mesh_shape bounds it by kMaxRanks
    for (int r = 0; r < n; ++r) ranks.push_back(r);
  }
  return {shape, ranks};
}

}  // namespace

bool cross_mesh_flags(const CLI::App& cmd) {
  for (const char* flag : {"--from-mesh", "--from-ranks", "--to-mesh", "--to-ranks", "--world-size"})
    if (cmd.get_option_no_throw(flag) && cmd.count(flag) > 0) return true;
  return false;
}

std::pair<Mesh, Mesh> make_meshes(const CLI::App& cmd, const PlanFlags& flags) {
  if (!cross_mesh_flags(cmd)) {
    const Mesh mesh = make_mesh(flags.tensor);
    return {mesh, mesh};
  }
  auto [from_shape, from_ranks] = side_mesh(flags, flags.from_mesh, flags.from_ranks, "--from-mesh", "--from-ranks");
  auto [to_shape, to_ranks] = side_mesh(flags, flags.to_mesh, flags.to_ranks, "--to-mesh", "--to-ranks");
  int world = flags.world_size;
  if (cmd.count("--world-size")) {
    RESHARD_REQUIRE(world >= 1 && world <= kMaxRanks, "--world-size must be in 1..", kMaxRanks, ", got ", world);
  } else {
    world = 0;
    for (const std::vector<int>* side : {&from_ranks, &to_ranks})
      for (int r : *side) world = std::max(world, r + 1);
  }
  auto build = [&](std::vector<int> shape, std::vector<int> ranks, const char* flag) {
    try {
      return Mesh(std::move(shape), std::move(ranks), world);
    } catch (const Error& e) {
      fail(e.kind(), cat(flag, ": ", e.what()));
    }
  };
  return {build(from_shape, from_ranks, "--from-ranks"), build(to_shape, to_ranks, "--to-ranks")};
}

void add_tensor_flags(CLI::App& cmd, TensorFlags& flags, bool required) {
  CLI::Option* mesh = cmd.add_option("--mesh", flags.mesh, "Mesh shape, e.g. 2x4");
  CLI::Option* shape = cmd.add_option("--shape", flags.shape, "Global tensor shape, e.g. 8192x8192");
  if (required) {
    mesh->required();
    shape->required();
  }
  cmd.add_option("--ranks", flags.ranks, "Explicit rank at each row-major mesh coordinate, e.g. 3,2,1,0");
}

Mesh make_mesh(const TensorFlags& flags) {
  std::vector<int> shape = parse_mesh_shape(flags.mesh);
  if (flags.ranks.empty()) return Mesh(shape);
  std::vector<int> ranks;
  for (std::string_view part : split(flags.ranks, ',')) {
    std::optional<long long> v = parse_integer(part);
    if (!v || *v < 0 || *v > std::numeric_limits<int>::max())
      fail(ErrorKind::kParse, cat("--ranks '", flags.ranks, "': '", part, "' is not a rank number"));
    ranks.push_back(static_cast<int>(*v));
  }
  return Mesh(shape, ranks);
}

Layout make_layout(const TensorFlags& flags, const std::string& placements) {
  return Layout(make_mesh(flags), parse_placements(placements), parse_shape(flags.shape));
}

void add_plan_flags(CLI::App& cmd, PlanFlags& flags) {
  add_tensor_flags(cmd, flags.tensor, false);
  cmd.add_option("--from", flags.from, "Source placements, one per mesh dim (e.g. S0,S1)");
  cmd.add_option("--to", flags.to, "Target placements, one per mesh dim (e.g. S1,S0)");
  add_mesh_pair_flags(cmd, flags);
  cmd.add_option("--dtype", flags.dtype,
                 "Element type: f64 f32 f16 bf16 i64 i32 i16 i8 u8 bool f8e4m3 f8e5m2 c64 (or PyTorch's names)")
      ->capture_default_str();
  cmd.add_option("--to-dtype", flags.to_dtype,
                 "Target element type (default: --dtype): the move converts on the receiver; floating pairs of f64 f32 "
                 "f16 bf16 f8e4m3 f8e5m2, as PyTorch's tensor.to(dtype)");
  add_plan_option_flags(cmd, flags.options);
}

void add_plan_option_flags(CLI::App& cmd, std::map<std::string, std::string>& options,
                           std::initializer_list<std::string_view> except) {
  for (const PlanOptionSpec& spec : plan_option_specs()) {
    if (std::find(except.begin(), except.end(), spec.name) != except.end()) continue;
    const std::string name(spec.name);
    if (spec.kind == OptionKind::kSwitch)
      cmd.add_flag_callback(
          cli_flag(name), [&options, name] { options[name] = "true"; }, std::string(spec.help));
    else
      cmd.add_option_function<std::string>(
          cli_flag(name), [&options, name](const std::string& v) { options[name] = v; }, std::string(spec.help));
  }
}

void apply_plan_options(const std::map<std::string, std::string>& given, PlanOptions& options) {
  for (const auto& [name, text] : given) set_plan_option(options, name, text);
}

void add_mesh_pair_flags(CLI::App& cmd, PlanFlags& flags) {
  cmd.add_option("--from-mesh", flags.from_mesh,
                 "Source mesh shape, for a redistribution between meshes (plan, run: default --mesh)");
  cmd.add_option("--from-ranks", flags.from_ranks,
                 "World ranks of the source mesh, row-major, as a list with ranges (e.g. 0-3,6,7; default 0..n-1)");
  cmd.add_option("--to-mesh", flags.to_mesh,
                 "Target mesh shape, between meshes (plan, run: default --mesh; bench: --from-mesh)");
  cmd.add_option("--to-ranks", flags.to_ranks, "World ranks of the target mesh (as --from-ranks)");
  cmd.add_option("--world-size", flags.world_size,
                 "Ranks in the world both meshes sit in (default: one more than the largest rank given)");
}

PlanRequest make_plan_request(const CLI::App& cmd, const PlanFlags& flags) {
  const char* alt = cmd.get_option_no_throw("--plan")   ? "--plan"
                    : cmd.get_option_no_throw("--load") ? "--load"
                                                        : nullptr;
  if (flags.from_mesh.empty() && flags.to_mesh.empty()) require_flag(cmd, flags.tensor.mesh, "--mesh", alt);
  require_flag(cmd, flags.from, "--from", alt);
  require_flag(cmd, flags.to, "--to", alt);
  require_flag(cmd, flags.tensor.shape, "--shape", alt);
  const auto [from_mesh, to_mesh] = make_meshes(cmd, flags);
  const Dims shape = parse_shape(flags.tensor.shape);
  const DType dtype = parse_dtype(flags.dtype);
  PlanRequest req{Layout(from_mesh, parse_placements(flags.from), shape),
                  Layout(to_mesh, parse_placements(flags.to), shape), dtype,
                  flags.to_dtype.empty() ? dtype : parse_dtype(flags.to_dtype), PlanOptions{}};
  if (req.to_dtype != req.dtype) validate_conversion(req.dst, req.dtype, req.to_dtype);
  apply_plan_options(flags.options, req.options);
  return req;
}

Plan load_plan_for(const CLI::App& cmd, const PlanFlags& flags, const std::string& path, const char* file_flag) {
  for (const PlanOptionSpec& spec : plan_option_specs()) {
    const std::string flag = cli_flag(spec.name);
    RESHARD_REQUIRE(cmd.count(flag) == 0, flag, " shapes a new plan; it cannot be combined with ", file_flag,
                    " (the plan file fixes it)");
  }
  Plan plan = load_plan(path);
  auto same = [&](const char* flag, const std::string& given, const std::string& in_plan) {
    RESHARD_REQUIRE(given == in_plan, file_flag, " '", path, "' is a plan for ", flag, " ", in_plan, ", not ", given);
  };
  if (cross_mesh_flags(cmd)) {
    const auto [from_mesh, to_mesh] = make_meshes(cmd, flags);
    same("--from-mesh", from_mesh.str(), plan.src().mesh().str());
    same("--to-mesh", to_mesh.str(), plan.dst().mesh().str());
  } else if (!flags.tensor.mesh.empty()) {
    Mesh mesh = make_mesh(flags.tensor);
    same("--mesh", mesh.str(), plan.src().mesh().str());
    RESHARD_REQUIRE(mesh == plan.src().mesh(), file_flag, " '", path, "' places the ranks of mesh ", mesh.str(),
                    " differently (--ranks)");
  }
  if (!flags.tensor.shape.empty())
    same("--shape", to_string(parse_shape(flags.tensor.shape)), to_string(plan.src().global_shape()));
  if (!flags.from.empty()) same("--from", to_string(parse_placements(flags.from)), to_string(plan.src().placements()));
  if (!flags.to.empty()) same("--to", to_string(parse_placements(flags.to)), to_string(plan.dst().placements()));
  if (cmd.count("--dtype"))
    same("--dtype", std::string(to_string(parse_dtype(flags.dtype))), std::string(to_string(plan.dtype())));
  if (cmd.count("--to-dtype"))
    same("--to-dtype", std::string(to_string(parse_dtype(flags.to_dtype))),
         std::string(to_string(plan.target_dtype())));
  return plan;
}

Index parse_bytes(const std::string& flag, const std::string& text) {
  tools::ByteCountError error = tools::ByteCountError::kNone;
  std::optional<Index> bytes = tools::parse_byte_count(text, &error);
  if (bytes) return *bytes;
  const std::string shown = printable(text);
  switch (error) {
    case tools::ByteCountError::kEmpty:
      fail(ErrorKind::kParse, cat(flag, ": empty value; expected a byte count (e.g. 1048576, 64MiB)"));
    case tools::ByteCountError::kNegative:
      fail(ErrorKind::kInvalidArgument, cat(flag, " must be >= 0 bytes, got ", shown));
    case tools::ByteCountError::kTooLarge:
      fail(ErrorKind::kInvalidArgument, cat(flag, " '", shown, "' does not fit in 64 bits"));
    default:
      fail(ErrorKind::kParse, cat(flag, " '", shown, "' is not a byte count (e.g. 1048576, 64MiB)"));
  }
}

int check_rank(const char* flag, long long rank, const Mesh& mesh) {
  RESHARD_REQUIRE(rank >= 0 && rank < mesh.world_size(), flag, ": rank ", rank, " is not in mesh ", mesh.str(),
                  " (ranks 0..", mesh.world_size() - 1, ")");
  return static_cast<int>(rank);
}

LaunchEnvironment launch_environment() {
  LaunchEnvironment env;
  constexpr int kMax = std::numeric_limits<int>::max();
  env.world_size = env_int("WORLD_SIZE", 1, 1, kMax, env.set);
  env.rank = env_int("RANK", 0, 0, env.world_size - 1, env.set);
  bool local = false;
  env.local_rank = env_int("LOCAL_RANK", env.rank, 0, kMax, local);
  const char* addr = std::getenv("MASTER_ADDR");
  bool port_set = false;
  int port = env_int("MASTER_PORT", 0, 1, 65534, port_set);
  if (addr && *addr && port_set) env.rendezvous = cat("tcp:", addr, ":", port + 1);
  return env;
}

std::optional<ProcessPlace> process_place(const std::string& rendezvous_flag, const std::string& backend_flag,
                                          const char* command) {
  if (!rendezvous_flag.empty()) check_rendezvous_spec(rendezvous_flag);  // before anything else is looked at
  const LaunchEnvironment env = launch_environment();
  if (env.world_size <= 1 && rendezvous_flag.empty()) return std::nullopt;
  ProcessPlace place{env, rendezvous_flag.empty() ? env.rendezvous : rendezvous_flag};
  RESHARD_REQUIRE(backend_flag != "host", "WORLD_SIZE=", env.world_size,
                  " (a launcher started one process per rank) needs the nccl backend; --backend host runs every "
                  "rank in one process: unset WORLD_SIZE and RANK for that");
  if (env.rank == 0)
    fmt::print(stderr,
               "reshard {}: multi-process mode (WORLD_SIZE={} from the environment): this process is rank {} on "
               "local GPU {}; NCCL rendezvous {}\n",
               command, env.world_size, env.rank, env.local_rank,
               place.rendezvous.empty() ? "(none)" : place.rendezvous);
  const int gpus = local_gpu_count();
  RESHARD_REQUIRE(env.local_rank < gpus, "multi-process mode needs one GPU per process: LOCAL_RANK ", env.local_rank,
                  " but ", gpus, " GPUs are visible (to run every rank in this process, unset WORLD_SIZE and RANK)");
  RESHARD_REQUIRE(!place.rendezvous.empty(), "multi-process ", command,
                  ": give --rendezvous file:PATH or tcp:HOST:PORT");
  return place;
}

}  // namespace reshard::cli
