// The same plan-prepare-run cycle on the host backend (CPU threads, no GPU): what CI runs.
#include <cstdio>
#include <vector>

#include "reshard/executor.hpp"
#include "reshard/host_backend.hpp"
#include "reshard/pattern.hpp"
#include "reshard/planner.hpp"

int main() {
  using namespace reshard;
  Mesh mesh({2, 2});
  Layout src(mesh, parse_placements("S0,S1"), Dims{64, 48});
  Layout dst = src.with_placements(parse_placements("S1,S0"));
  PlanOptions options;
  options.strategy = Strategy::kP2P;  // the seed example: only ranks 1 and 2 exchange blocks
  Plan plan = make_plan(src, dst, DType::kF32, options);

  HostWorld world(mesh.size());
  std::vector<Index> wrong(mesh.size(), 0);
  run_ranks(
      mesh.size(),
      [&](int rank) {
        HostCommunicator comm(world, rank);
        HostDevice device;
        Executor exec(plan, comm, device);
        std::vector<std::byte> in(exec.input_bytes()), out(exec.output_bytes());
        fill_pattern(in.data(), src.box(rank), src.global_shape(), DType::kF32);
        exec.run({in.data(), in.size()}, {out.data(), out.size()}, nullptr);
        wrong[rank] = count_mismatches(out.data(), dst.box(rank), dst.global_shape(), DType::kF32);
      },
      &world);
  Index total = 0;
  for (Index w : wrong) total += w;
  std::printf("%s: %zu steps, %lld bytes moved; wrong elements: %lld\n",
              std::string(to_string(plan.strategy())).c_str(), plan.steps().size(),
              static_cast<long long>(plan.bytes_moved()), static_cast<long long>(total));
  return total == 0 ? 0 : 1;
}
