#include "reshard/memory_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>

#include "reshard/plan_format.hpp"
#include "reshard/text.hpp"
#include "reshard/tools_text.hpp"

namespace reshard {
namespace {

constexpr const char* kLimitVariable = "RESHARD_MEMORY_LIMIT_BYTES";

// Sums byte counts, naming the figure when it would not fit in 64 bits.
struct Tally {
  Index total = 0;
  std::vector<std::pair<const char*, Index>> parts;
  void add(const char* what, Index bytes) {
    total = checked_add(total, bytes, "the memory this run needs");
    for (auto& [name, b] : parts)
      if (name == what) {
        b += bytes;
        return;
      }
    parts.emplace_back(what, bytes);
  }
  std::string detail() const {
    std::string s;
    for (const auto& [name, b] : parts) {
      if (b == 0) continue;
      if (!s.empty()) s += " + ";
      s += fmt::format("{} {}", name, human_bytes(static_cast<double>(b)));
    }
    return s.empty() ? "nothing" : s;
  }
};

Index local_bytes(const Layout& layout, int rank, int es) {
  return checked_mul(layout.local_volume(rank), es, "a rank's tensor bytes");
}

// The host transport's transient memory for step i: messages posted and not yet taken, and collectives' staging.
Index host_transient(const Plan& plan, size_t i) {
  const Step& s = plan.steps()[i];
  const int n = plan.src().mesh().world_size(), es = plan.element_size();
  if (s.kind == StepKind::kLocal) return 0;
  if (s.kind == StepKind::kP2P || s.kind == StepKind::kAllToAll) return s.bytes_moved;
  const Layout a = plan.layout_before(i), b = plan.layout_before(i + 1);
  const Index g = plan.src().mesh().group_size(s.mesh_dims);
  Index total = 0;
  for (int r = 0; r < n; ++r) {
    Index per = s.kind == StepKind::kReduceScatter ? local_bytes(b, r, es) : local_bytes(a, r, es);
    Index posted = checked_mul(g - 1, per, "a collective's message bytes");
    Index staged = s.kind == StepKind::kAllGather ? 0 : checked_mul(g, per, "a collective's staging bytes");
    total = checked_add(total, checked_add(posted, staged, "a step's bytes"), "a step's bytes");
  }
  return total;
}

std::optional<Index> read_number(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return std::nullopt;
  std::optional<long long> v = parse_integer(text);
  if (!v || *v < 0 || *v >= (Index(1) << 60)) return std::nullopt;  // "unlimited" is a huge number in cgroup v1
  return *v;
}

// Limit minus usage of this process's memory cgroup (v2, then v1); nullopt without a limit.
std::optional<Index> cgroup_available() {
  for (auto [limit, usage] :
       {std::pair{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
        std::pair{"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"}}) {
    std::optional<Index> l = read_number(limit);
    if (!l) continue;
    return std::max<Index>(0, *l - read_number(usage).value_or(0));
  }
  return std::nullopt;
}

std::string limit_note() { return injected_memory_limit() ? fmt::format(", capped by {}", kLimitVariable) : ""; }

}  // namespace

MemoryNeed memory_need(const Plan& plan, Backend backend, std::optional<int> rank, int buffer_sets) {
  const int n = plan.src().mesh().world_size(), es = plan.element_size();
  const bool partial = plan.src().has_partial() || plan.dst().has_partial();
  const Index workspace = plan.peak_workspace_bytes();
  Tally host, device;
  MemoryNeed need;
  if (backend == Backend::kHost) {
    for (int r = 0; r < n; ++r) {
      host.add("sources", local_bytes(plan.src(), r, es));
      host.add("targets", local_bytes(plan.dst(), r, plan.target_element_size()));
      host.add("workspace", workspace);
    }
    Index transient = 0;
    for (size_t i = 0; i < plan.steps().size(); ++i) transient = std::max(transient, host_transient(plan, i));
    host.add("messages in flight", transient);
  } else {
    Index worst = 0;
    for (int r = rank.value_or(0); r < (rank ? *rank + 1 : n); ++r) {
      const Index in = checked_mul(local_bytes(plan.src(), r, es), buffer_sets, "a rank's source sets");
      const Index out =
          checked_mul(local_bytes(plan.dst(), r, plan.target_element_size()), buffer_sets, "a rank's target sets");
      Index mine = checked_add(checked_add(in, out, "a rank's bytes"), workspace, "a rank's bytes");
      if (mine >= worst) {
        worst = mine;
        device = Tally{};
        device.add("source", in);
        device.add("target", out);
        device.add("workspace", workspace);
      }
      if (partial) {
        host.add("Partial sources staged", in);
        host.add("Partial targets staged", out);
      }
    }
  }
  need.host_bytes = host.total;
  need.host_detail = host.detail();
  need.device_bytes = device.total;
  need.device_detail = device.detail();
  return need;
}

MemoryNeed memory_need(const PlanBatch& batch, Backend backend, std::optional<int> rank, int buffer_sets) {
  if (batch.size() == 1) return memory_need(batch.plan(0), backend, rank, buffer_sets);
  MemoryNeed sum;
  Index staging = 0;
  for (const auto& plan : batch.plans()) {
    const MemoryNeed one = memory_need(*plan, backend, rank, buffer_sets);
    sum.host_bytes = checked_add(sum.host_bytes, one.host_bytes, "a batch's memory");
    sum.device_bytes = checked_add(sum.device_bytes, one.device_bytes, "a batch's memory");
    staging = checked_add(staging, plan->peak_workspace_bytes(), "a batch's memory");
  }
  if (backend == Backend::kHost) {
    sum.host_bytes = checked_add(sum.host_bytes, checked_mul(staging, batch.mesh().world_size(), "a batch's memory"),
                                 "a batch's memory");
    sum.host_detail = fmt::format("{} tensors' needs summed, plus staging", batch.size());
  } else {
    sum.device_bytes = checked_add(sum.device_bytes, staging, "a batch's memory");
    sum.device_detail = fmt::format("{} tensors' needs summed, plus staging", batch.size());
  }
  return sum;
}

std::optional<Index> injected_memory_limit() {
  const char* v = std::getenv(kLimitVariable);
  if (!v || !*v) return std::nullopt;
  std::optional<Index> bytes = tools::parse_byte_count(v);
  RESHARD_REQUIRE(bytes, kLimitVariable, "='", printable(v), "' is not a byte count (e.g. 1048576, 64MiB)");
  return bytes;
}

Index available_host_memory() {
  Index available = std::numeric_limits<Index>::max();
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  Index kb = 0;
  bool found = false;
  while (std::getline(meminfo, line)) {
    std::istringstream ls(line);
    std::string key;
    Index value = 0;
    if (!(ls >> key >> value)) continue;
    if (key == "MemAvailable:" || key == "SwapFree:") {
      kb += value;
      found = found || key == "MemAvailable:";
    }
  }
  if (found) available = kb * 1024;
  if (std::optional<Index> c = cgroup_available()) available = std::min(available, *c);
  if (std::optional<Index> l = injected_memory_limit()) available = std::min(available, *l);
  return available;
}

Index device_free_bytes(int device);  // harness_nccl.cpp / harness_without_cuda.cpp

Index available_device_memory(int device) {
  Index free = device_free_bytes(device);
  if (std::optional<Index> l = injected_memory_limit()) free = std::min(free, *l);
  return free;
}

void check_memory(const MemoryNeed& need, Backend backend, const std::vector<int>& devices) {
  auto figure = [](Index b) { return fmt::format("{} bytes ({})", b, human_bytes(static_cast<double>(b))); };
  Index host = available_host_memory();
  RESHARD_REQUIRE(need.host_bytes <= host, "this run needs ", figure(need.host_bytes), " of host memory (",
                  need.host_detail, ") but ", figure(host),
                  " is available (MemAvailable + SwapFree, within the cgroup limit", limit_note(),
                  "); use a smaller --shape or mesh", backend == Backend::kHost ? ", or GPUs (--backend nccl)" : "");
  if (backend != Backend::kNccl) return;
  for (int d : devices) {
    Index free = available_device_memory(d);
    RESHARD_REQUIRE(need.device_bytes <= free, "this run needs ", figure(need.device_bytes), " on GPU ", d, " (",
                    need.device_detail, ") but ", figure(free), " is free there (cudaMemGetInfo", limit_note(),
                    "); use a smaller --shape, more ranks, or a --memory-budget for the workspace");
  }
}

}  // namespace reshard
