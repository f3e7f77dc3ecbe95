// Mapping costs for `reshard calibrate`: this executable started as `reshard run`, one process per GPU, under a
// launcher's environment it makes itself (RANK, WORLD_SIZE, LOCAL_RANK, a fresh rendezvous token, a file rendezvous in
// a private temporary directory).
#include "calibrate_mapping.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>
#include <thread>
#include <vector>

#include "reshard/error.hpp"
#include "reshard/harness.hpp"
#include "reshard/rendezvous.hpp"

extern char** environ;

namespace reshard::cli {
namespace {

constexpr int kMaxMappingRanks = 8;
constexpr const char* kShape = "1024x1024";  // 4 MiB of f32: mapping costs do not depend on the size

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string tail(const std::string& text, size_t chars = 1500) {
  return text.size() <= chars ? text : "..." + text.substr(text.size() - chars);
}

// This process's environment with the launcher's variables set for rank `rank` of `n`.
std::vector<std::string> rank_environment(int rank, int n, const std::string& token) {
  const std::vector<std::string> set = {"RANK=" + std::to_string(rank), "LOCAL_RANK=" + std::to_string(rank),
                                        "WORLD_SIZE=" + std::to_string(n), "LOCAL_WORLD_SIZE=" + std::to_string(n),
                                        std::string(kRendezvousTokenEnv) + "=" + token};
  auto key = [](std::string_view entry) { return entry.substr(0, entry.find('=')); };
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e)
    if (std::none_of(set.begin(), set.end(), [&](const std::string& s) { return key(s) == key(*e); }))
      env.emplace_back(*e);
  env.insert(env.end(), set.begin(), set.end());
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// One `reshard run` job of n processes with `--buffers buffers`; rank 0's median per call (us).
double run_job(const std::string& exe, const std::string& dir, int n, const char* buffers, int iters, int timeout_s) {
  const std::string token = make_rendezvous_token();
  const std::string base = dir + "/" + buffers;
  std::vector<pid_t> pids;
  auto stop_all = [&] {
    for (pid_t p : pids) ::kill(p, SIGKILL);
    for (pid_t p : pids) ::waitpid(p, nullptr, 0);
  };
  for (int r = 0; r < n; ++r) {
    const std::string log = base + "_" + std::to_string(r) + ".log";
    std::vector<std::string> args = {exe,
                                     "run",
                                     "--mesh",
                                     std::to_string(n),
                                     "--from",
                                     "S0",
                                     "--to",
                                     "S1",
                                     "--shape",
                                     kShape,
                                     "--dtype",
                                     "f32",
                                     "--strategy",
                                     "p2p",
                                     "--transport",
                                     "nvlink",
                                     "--buffers",
                                     buffers,
                                     "--iters",
                                     std::to_string(iters),
                                     "--warmup",
                                     "3",
                                     "--rendezvous",
                                     "file:" + base + ".rendezvous",
                                     "--json",
                                     base + "_" + std::to_string(r) + ".json"};
    std::vector<std::string> env = rank_environment(r, n, token);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, exe.c_str(), &actions, nullptr, pointers(args).data(), pointers(env).data());
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      stop_all();
      fail(ErrorKind::kBackend, cat("calibrate: cannot start ", exe, " for the mapping runs: ", std::strerror(rc)));
    }
    pids.push_back(pid);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  std::vector<int> status(pids.size(), -1);
  for (size_t done = 0; done < pids.size();) {
    done = 0;
    for (size_t r = 0; r < pids.size(); ++r) {
      if (status[r] >= 0) {
        ++done;
        continue;
      }
      int s = 0;
      if (::waitpid(pids[r], &s, WNOHANG) == pids[r]) {
        status[r] = WIFEXITED(s) ? WEXITSTATUS(s) : 128 + WTERMSIG(s);
        pids[r] = -1;
        ++done;
      }
    }
    if (done == pids.size()) break;
    if (std::chrono::steady_clock::now() > deadline) {
      std::erase(pids, -1);
      stop_all();
      fail(ErrorKind::kTimeout,
           cat("calibrate: the mapping run with --buffers ", buffers, " on ", n, " processes did not finish within ",
               timeout_s, " s; rank 0 wrote: ", tail(read_all(base + "_0.log"))));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (int r = 0; r < n; ++r)
    if (status[r] != 0)
      fail(ErrorKind::kBackend,
           cat("calibrate: the mapping run with --buffers ", buffers, " failed on rank ", r, " (exit ", status[r],
               "): ", tail(read_all(base + "_" + std::to_string(r) + ".log"))));
  const nlohmann::json record = nlohmann::json::parse(read_all(base + "_0.json"), nullptr, false);
  RESHARD_REQUIRE(record.is_object() && record.contains("median_us") && record["median_us"].is_number() &&
                      record.value("wrong", -1) == 0,
                  "calibrate: the mapping run with --buffers ", buffers,
                  " left no verified result: ", tail(read_all(base + "_0.log")));
  return record["median_us"].get<double>();
}

}  // namespace

std::string calibrate_mapping(Profile& profile, int iters, int timeout_s) {
  const int n = std::min(local_gpu_count(), kMaxMappingRanks);
  if (n < 2) return "nvlink map_us and first_map_us from the base profile (one GPU: no peer to map)";
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  RESHARD_REQUIRE(!ec, "calibrate: cannot find this executable (/proc/self/exe): ", ec.message());
  std::string dir = (std::filesystem::temp_directory_path() / "reshard_calibrate_XXXXXX").string();
  RESHARD_REQUIRE(::mkdtemp(dir.data()) != nullptr,
                  "calibrate: cannot make a temporary directory: ", std::strerror(errno));
  struct Remove {
    std::string dir;
    ~Remove() {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  } remove{dir};
  // kNew allocates one buffer set per run: the timed runs are kept few.
  const int runs = std::clamp(iters, 10, 50);
  const double same = run_job(exe.string(), dir, n, "same", runs, timeout_s);
  const double cached = run_job(exe.string(), dir, n, "cached", runs, timeout_s);
  const double fresh = run_job(exe.string(), dir, n, "new", runs, timeout_s);
  const int pairs = n * (n - 1);
  profile.nvlink.map_us = std::max(0.0, (cached - same) / pairs);
  profile.nvlink.first_map_us = std::max(0.0, (fresh - same) / pairs);
  return fmt::format(
      "nvlink map_us {:.1f} and first_map_us {:.1f} per (rank, peer) pair from `reshard run` on {} processes, mesh "
      "({}) S0->S1 {} f32 on nvlink: {:.1f} us a call on the same buffers, {:.1f} on cached ones, {:.1f} on new ones, "
      "over {} pairs",
      profile.nvlink.map_us, profile.nvlink.first_map_us, n, n, kShape, same, cached, fresh, pairs);
}

}  // namespace reshard::cli
