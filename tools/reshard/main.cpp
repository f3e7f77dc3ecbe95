// reshard: plan and execute DTensor redistributions.
//
// Exit codes: 0 success; 1 a runtime failure (communication error, timeout, wrong data, an output that cannot be
// written); 2 a usage or input error (unknown command or flag, malformed mesh / placements / shape, inconsistent
// options, a request that does not fit in memory); 128 + N when stopped by signal N (SIGINT, SIGTERM). Errors go to
// stderr as one line: "reshard <command>: error: <message>", control characters escaped.
#include <fmt/format.h>

#include <cstdio>
#include <map>

#include "cli_args.hpp"
#include "cli_common.hpp"
#include "cli_output.hpp"
#include "cli_signals.hpp"
#include "reshard/error.hpp"
#include "reshard/interrupt.hpp"
#include "reshard/text.hpp"
#include "reshard/version.hpp"

namespace {

int report(const std::string& command, std::string_view kind, std::string_view message, int code) {
  std::fflush(stdout);
  std::string prefix = command.empty() ? "reshard" : "reshard " + command;
  // The whole message, control characters escaped: the error names what it quotes, already shortened.
  fmt::print(stderr, "{}: {}{}\n", prefix, kind, reshard::printable(message, std::string_view::npos));
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace reshard;
  CLI::App app{"reshard: plan and execute DTensor redistributions across a device mesh"};
  app.require_subcommand(1);
  app.fallthrough(false);
  app.set_version_flag("--version", std::string("reshard ") + kVersionString);
  std::map<std::string, cli::Command> commands;
  commands["layout"] = cli::add_layout_command(app);
  commands["plan"] = cli::add_plan_command(app);
  commands["run"] = cli::add_run_command(app);
  commands["bench"] = cli::add_bench_command(app);
  commands["calibrate"] = cli::add_calibrate_command(app);
  commands["contention"] = cli::add_contention_command(app);

  std::string name;
  try {
    cli::check_arguments(app, argc, argv, name);
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return report(name, "error: ", std::string(e.what()) + " (see --help)", 2);
  } catch (const Error& e) {
    return report(name, "error: ", e.what(), 2);
  }
  name = app.get_subcommands().front()->get_name();
  const bool long_running = name == "run" || name == "bench" || name == "calibrate" || name == "contention";
  std::optional<cli::InterruptWatcher> watcher;
  if (long_running) watcher.emplace(name);
  try {
    int code = commands.at(name)();
    cli::finish_stdout();
    return code;
  } catch (const cli::WriteFailure& e) {
    return report(name, "error: ", e.what(), 1);
  } catch (const Error& e) {
    if (stop_requested()) return report(name, "", cli::interrupted_message(stop_signal()), 128 + stop_signal());
    bool usage = e.kind() == ErrorKind::kInvalidArgument || e.kind() == ErrorKind::kParse;
    return report(name, "error: ", e.what(), usage ? 2 : 1);
  } catch (const std::bad_alloc&) {
    return report(name, "error: ", "out of memory (a request larger than this machine holds; narrow it)", 1);
  } catch (const std::exception& e) {
    if (stop_requested()) return report(name, "", cli::interrupted_message(stop_signal()), 128 + stop_signal());
    return report(name, "internal error: ", e.what(), 1);
  }
}
