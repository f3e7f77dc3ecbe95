#include "reshard/plan_option_table.hpp"

#include <array>
#include <limits>

#include "reshard/error.hpp"
#include "reshard/profile.hpp"
#include "reshard/text.hpp"

namespace reshard {
namespace {

using K = OptionKind;

constexpr std::array kSpecs = {
    PlanOptionSpec{"strategy", K::kChoice, "auto, collective, p2p or hybrid", "p2p"},
    PlanOptionSpec{"transport", K::kChoice,
                   "auto, nccl (two-sided, staged) or nvlink (one-sided peer copies, one host)", "nccl"},
    PlanOptionSpec{"fuse", K::kChoice,
                   "auto, always or never: run an nvlink step's peer copies as one kernel per rank (small tensors)",
                   "never"},
    PlanOptionSpec{"relay", K::kChoice,
                   "auto, always or never: a region several ranks of a node need from another node crosses into it "
                   "once and is forwarded inside (p2p steps on nccl)",
                   "always"},
    PlanOptionSpec{"ranks_per_node", K::kCount, "Ranks (GPUs) per node, for the cost model (default 8)", "4"},
    PlanOptionSpec{"profile", K::kPath, "Cost-model profile JSON (default: built-in H100/H200 + IB400)", ""},
    PlanOptionSpec{"memory_budget", K::kByteCount,
                   "Workspace limit per rank in bytes (suffixes KiB, MiB, GiB); a batch of run: for the whole set",
                   "64MiB"},
    PlanOptionSpec{"max_collectives", K::kCount, "Cap on the collective strategy's communication steps", "2"},
    PlanOptionSpec{"pipeline_chunk", K::kByteCount,
                   "Pipeline p2p transfers that need packing in chunks of this many bytes (default 0: off)", "16MiB"},
    PlanOptionSpec{"low_sm", K::kSwitch,
                   "Low-SM mode, for a redistribution run beside compute: price SM kernels (NCCL, copy kernels) at "
                   "the profile's low_sm_kernel_factor, so auto prefers copy engines",
                   "true"},
    PlanOptionSpec{"buffers_change", K::kSwitch,
                   "Plan for a caller whose tensors change every call (as reshard.torch's): an nvlink first step is "
                   "staged through the workspace where that is cheaper than mapping the peers' tensors",
                   "true"},
};

Index byte_count(const std::string& flag, std::string_view text) {
  ByteCountError error = ByteCountError::kNone;
  std::optional<Index> bytes = parse_byte_count(text, &error);
  if (bytes) return *bytes;
  const std::string shown = printable(text);
  switch (error) {
    case ByteCountError::kEmpty:
      fail(ErrorKind::kParse, cat(flag, ": empty value; expected a byte count (e.g. 1048576, 64MiB)"));
    case ByteCountError::kNegative:
      fail(ErrorKind::kInvalidArgument, cat(flag, " must be >= 0 bytes, got ", shown));
    case ByteCountError::kTooLarge:
      fail(ErrorKind::kInvalidArgument, cat(flag, " '", shown, "' does not fit in 64 bits"));
    default:
      fail(ErrorKind::kParse, cat(flag, " '", shown, "' is not a byte count (e.g. 1048576, 64MiB)"));
  }
}

// A whole number in [least, most].
int count(const std::string& flag, std::string_view text, int least, int most) {
  if (text.empty()) fail(ErrorKind::kParse, cat(flag, ": empty value; expected a whole number"));
  bool overflow = false;
  const std::optional<long long> v = parse_integer(text, &overflow);
  if (!v && !overflow) fail(ErrorKind::kParse, cat(flag, " '", printable(text), "' is not a whole number"));
  if (overflow) fail(ErrorKind::kInvalidArgument, cat(flag, " '", printable(text), "' is out of range"));
  RESHARD_REQUIRE(*v >= least, flag, " must be >= ", least, ", got ", printable(text));
  RESHARD_REQUIRE(*v <= most, flag, " must be <= ", most, ", got ", *v);
  return static_cast<int>(*v);
}

bool on(const std::string& flag, std::string_view text) {
  if (text == "true" || text == "1") return true;
  if (text == "false" || text == "0") return false;
  fail(ErrorKind::kParse, cat(flag, " '", printable(text), "' is not true or false"));
}

}  // namespace

std::span<const PlanOptionSpec> plan_option_specs() { return kSpecs; }

std::string cli_flag(std::string_view name) {
  std::string flag = "--";
  for (char c : name) flag += c == '_' ? '-' : c;
  return flag;
}

void set_plan_option(PlanOptions& o, std::string_view name, std::string_view text) {
  const std::string flag = cli_flag(name);
  if (name == "strategy") {
    o.strategy = parse_strategy(text);
  } else if (name == "transport") {
    o.transport = parse_transport(text);
  } else if (name == "fuse") {
    o.fusion = parse_fusion(text);
  } else if (name == "relay") {
    o.relay = parse_relay(text);
  } else if (name == "ranks_per_node") {
    o.topology.ranks_per_node = count(flag, text, 1, std::numeric_limits<int>::max());
  } else if (name == "profile") {
    o.profile = load_profile(std::string(text));
  } else if (name == "memory_budget") {
    o.memory_budget_bytes = byte_count(flag, text);
  } else if (name == "max_collectives") {
    o.max_collectives = count(flag, text, 0, std::numeric_limits<int>::max());
  } else if (name == "pipeline_chunk") {
    o.pipeline_chunk_bytes = byte_count(flag, text);
  } else if (name == "low_sm") {
    o.low_sm = on(flag, text);
  } else if (name == "buffers_change") {
    o.buffers_change = on(flag, text);
  } else {
    fail(ErrorKind::kInvalidArgument, cat("'", printable(name), "' is not a plan option"));
  }
}

}  // namespace reshard
