#include "cli_args.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "reshard/error.hpp"
#include "reshard/text.hpp"

namespace reshard::cli {
namespace {

// Optimal string alignment distance (Levenshtein with adjacent transpositions).
size_t distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1, 0));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost =
          std::tolower(static_cast<unsigned char>(a[i - 1])) == std::tolower(static_cast<unsigned char>(b[j - 1])) ? 0
                                                                                                                   : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

// An option token: "--name", "--name=value", "-x" (a letter after the dash; "-5" and "-1e-3" are values).
bool is_option(std::string_view t) {
  if (t.size() < 2 || t[0] != '-') return false;
  if (t[1] == '-') return t.size() > 2 && std::isalpha(static_cast<unsigned char>(t[2]));
  return std::isalpha(static_cast<unsigned char>(t[1])) && t != "-nan" && t != "-inf";
}

std::vector<std::string> option_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* o : app.get_options()) {
    for (const std::string& n : o->get_lnames()) names.push_back("--" + n);
    for (const std::string& n : o->get_snames()) names.push_back("-" + n);
  }
  return names;
}

std::string suggestion(std::string_view name, const std::vector<std::string>& candidates) {
  std::string near = nearest(name, candidates);
  return near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near);
}

void check_options(const CLI::App& app, const std::string& where, int from, int to, const char* const* argv) {
  const std::vector<std::string> names = option_names(app);
  for (int i = from; i < to; ++i) {
    std::string_view t = argv[i];
    if (t == "--") return;
    if (!is_option(t)) continue;
    std::string_view name = t.substr(0, t.find('='));
    if (std::find(names.begin(), names.end(), name) != names.end()) continue;
    fail(ErrorKind::kInvalidArgument,
         fmt::format("unknown option '{}'{}{}", printable(name), where, suggestion(name, names)));
  }
}

}  // namespace

std::string nearest(std::string_view name, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = std::string::npos;
  std::vector<std::string> prefixed;
  for (const std::string& c : candidates) {
    size_t d = distance(name, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
    // A prefix either way: "--mem" for "--memory-budget", "benchmark" for "bench".
    const bool prefix =
        c.size() > name.size() ? c.compare(0, name.size(), name) == 0 : name.compare(0, c.size(), c) == 0;
    if (std::min(name.size(), c.size()) >= 3 && prefix) prefixed.push_back(c);
  }
  const size_t limit = std::max<size_t>(1, std::min<size_t>(3, name.size() / 3));
  if (best_d <= limit) return best;
  if (prefixed.size() == 1) return prefixed.front();
  return "";
}

void check_arguments(const CLI::App& app, int argc, const char* const* argv, std::string& command) {
  int i = 1;
  while (i < argc && is_option(argv[i])) ++i;  // options of `reshard` itself (--help, ...)
  check_options(app, " for reshard itself (options of a command come after its name)", 1, i, argv);
  if (i >= argc) return;
  std::vector<std::string> commands;
  for (const CLI::App* sub : app.get_subcommands({})) commands.push_back(sub->get_name());
  const std::string name = argv[i];
  const CLI::App* cmd = nullptr;
  for (const CLI::App* sub : app.get_subcommands({}))
    if (sub->check_name(name)) cmd = sub;  // its name or an alias
  if (!cmd) {
    std::string list;
    for (const std::string& c : commands) list += (list.empty() ? "" : ", ") + c;
    fail(ErrorKind::kInvalidArgument,
         fmt::format("unknown command '{}'{}; the commands are {}", printable(name), suggestion(name, commands), list));
  }
  command = cmd->get_name();
  check_options(*cmd, "", i + 1, argc, argv);
}

}  // namespace reshard::cli
