// reshard: plan and execute DTensor redistributions.
//
// Exit codes: 0 success; 1 a runtime failure (communication error, timeout, wrong data); 2 a usage or input
// error (unknown flag, malformed mesh / placements / shape, inconsistent options). Errors go to stderr as one line.
#include <iostream>
#include <map>

#include "cli_common.hpp"
#include "reshard/error.hpp"
#include "reshard/version.hpp"

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

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "reshard: error: " << e.what() << " (see --help)\n";
    return 2;
  }
  std::string name = app.get_subcommands().front()->get_name();
  try {
    return commands.at(name)();
  } catch (const Error& e) {
    std::cerr << "reshard " << name << ": error: " << e.what() << "\n";
    bool usage = e.kind() == ErrorKind::kInvalidArgument || e.kind() == ErrorKind::kParse;
    return usage ? 2 : 1;
  } catch (const std::exception& e) {
    std::cerr << "reshard " << name << ": internal error: " << e.what() << "\n";
    return 1;
  }
}
