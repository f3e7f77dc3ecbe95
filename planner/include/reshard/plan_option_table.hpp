// The plan options a caller sets by name, one row per PlanOptions setting. The CLI (`plan`, `run`, `bench`) adds its
// flags from this table and the Python bindings set their keyword arguments through it, so every front end accepts the
// same options with the same parsing, ranges and messages.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "reshard/plan_options.hpp"

namespace reshard {

enum class OptionKind {
  kChoice,     // one word of a fixed set
  kByteCount,  // bytes, with an optional KiB / MiB / GiB suffix
  kCount,      // a whole number
  kSwitch,     // on when given (its text "true" or "false")
  kPath,       // a file
};

struct PlanOptionSpec {
  std::string_view name;  // the Python keyword; the CLI flag is cli_flag(name)
  OptionKind kind;
  std::string_view help;
  std::string_view example;  // a value it accepts
};

// Every row, in the order the CLI's help lists them.
std::span<const PlanOptionSpec> plan_option_specs();
// "memory_budget" -> "--memory-budget".
std::string cli_flag(std::string_view name);
// Sets option `name` of `options` from its text. An unknown name, a malformed value or one out of range fails with
// one line naming the CLI flag (kParse or kInvalidArgument), as the CLI and the Python bindings both report it.
void set_plan_option(PlanOptions& options, std::string_view name, std::string_view text);

}  // namespace reshard
