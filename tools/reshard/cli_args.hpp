// Checks the command line against the registered commands and their options before CLI11 parses it, so that a
// mistyped name is the error reported (with the nearest valid name) rather than a consequence of it, such as a
// required flag said to be missing.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace reshard::cli {

// The candidate closest to `name` (edit distance with transpositions, or a unique prefix), or "" when none is close.
std::string nearest(std::string_view name, const std::vector<std::string>& candidates);

// kInvalidArgument "unknown command 'plna' (did you mean 'plan'?)" or "unknown option '--form' (did you mean
// '--from'?)". Sets `command` to the command's name as soon as it is known ("" when there is none, e.g. a bare
// --help), so that an error can name it.
void check_arguments(const CLI::App& app, int argc, const char* const* argv, std::string& command);

}  // namespace reshard::cli
