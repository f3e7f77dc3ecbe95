// Runs the reshard CLI in a subprocess and captures its exit code, stdout and stderr.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace reshard::testing {

// A small plan request the CLI tests share (mesh, placements and shape flags).
inline const std::string kCliRequest = "--mesh 2x2 --from S0,S1 --to S1,S0 --shape 64x48";

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

inline std::string temp_base() { return "/tmp/reshard_cli_test_" + std::to_string(::getpid()); }

// `args` is appended to the binary path verbatim (shell syntax). `env`: assignments put before it ("A=1 B=2").
// `stdout_to`: where stdout goes instead of being captured (e.g. /dev/full).
inline CliResult run_cli(const std::string& args, const std::string& env = "", const std::string& stdout_to = "") {
  std::string base = temp_base();
  std::string out = stdout_to.empty() ? base + ".out" : stdout_to;
  std::string cmd =
      (env.empty() ? "" : "env " + env + " ") + cli_path() + " " + args + " >" + out + " 2>" + base + ".err";
  int status = std::system(cmd.c_str());
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (stdout_to.empty()) r.out = read_file(base + ".out");
  r.err = read_file(base + ".err");
  std::remove((base + ".out").c_str());
  std::remove((base + ".err").c_str());
  return r;
}

// A CLI process started in the background (for signals), its output in files.
struct CliProcess {
  pid_t pid = -1;
  std::string out_path, err_path;
};

inline CliProcess spawn_cli(const std::string& args, const std::string& tag) {
  CliProcess p;
  p.out_path = temp_base() + "_" + tag + ".out";
  p.err_path = temp_base() + "_" + tag + ".err";
  std::string cmd = "exec " + cli_path() + " " + args + " >" + p.out_path + " 2>" + p.err_path;
  p.pid = ::fork();
  if (p.pid == 0) {
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return p;
}

// Waits up to `timeout` for the process; kills it (SIGKILL) and reports exit code -1 when it does not end in time.
inline CliResult wait_cli(const CliProcess& p, std::chrono::milliseconds timeout) {
  CliResult r;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (::waitpid(p.pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(p.pid, SIGKILL);
      ::waitpid(p.pid, &status, 0);
      r.exit_code = -1;
      r.out = read_file(p.out_path);
      r.err = read_file(p.err_path);
      return r;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_file(p.out_path);
  r.err = read_file(p.err_path);
  std::remove(p.out_path.c_str());
  std::remove(p.err_path.c_str());
  return r;
}

inline int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

}  // namespace reshard::testing
