// Runs the reshard CLI in a subprocess and captures its exit code, stdout and stderr.
#pragma once

#include <sys/wait.h>

#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace reshard::testing {

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The reshard binary: $RESHARD_CLI when set (a build tree moved elsewhere), else the one this build made.
inline std::string cli_path() {
  const char* env = std::getenv("RESHARD_CLI");
  return env && *env ? env : RESHARD_CLI;
}

// `args` is appended to the binary path verbatim (shell syntax).
inline CliResult run_cli(const std::string& args) {
  std::string base = "/tmp/reshard_cli_test_" + std::to_string(::getpid());
  std::string cmd = cli_path() + " " + args + " >" + base + ".out 2>" + base + ".err";
  int status = std::system(cmd.c_str());
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_file(base + ".out");
  r.err = read_file(base + ".err");
  std::remove((base + ".out").c_str());
  std::remove((base + ".err").c_str());
  return r;
}

inline int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

}  // namespace reshard::testing
