// One GPU (or more): small redistributions on the nvlink transport with both ranks of mesh (2) as threads sharing the
// visible GPUs (harness run_shared_gpus), eager and replayed from a CUDA graph, separate copies and fused: where a
// call's time goes without a second GPU. Not the 2-GPU figure (two ranks share one GPU's engines and SMs), but the
// same host work, stream operations and graph structure. Prints median and p90 per call (us), every element verified.
// Usage: shared_gpu_latency [iters (200)]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "reshard/harness.hpp"
#include "reshard/planner.hpp"

int main(int argc, char** argv) {
  using namespace reshard;
  const long iters = argc > 1 ? std::strtol(argv[1], nullptr, 10) : 200;
  if (iters < 1 || iters > 100000) {
    std::fprintf(stderr, "shared_gpu_latency: iterations must be 1 to 100000, got '%s'\n", argv[1]);
    return 2;
  }
  if (local_gpu_count() < 1) {
    std::printf("needs a GPU\n");
    return 0;
  }
  std::printf("%-8s %-10s %-10s %-8s %-6s %10s %10s %8s\n", "from", "to", "shape", "fused", "mode", "median_us",
              "p90_us", "wrong");
  const Mesh mesh({2});
  for (const char* pair : {"S0>S1", "S0>R", "R>S0"})
    for (Index n : {256, 1024})
      for (Fusion fusion : {Fusion::kNever, Fusion::kAlways}) {
        const std::string p(pair);
        const std::string from = p.substr(0, p.find('>')), to = p.substr(p.find('>') + 1);
        const Layout src(mesh, parse_placements(from), Dims{n, n});
        PlanOptions o;
        o.strategy = Strategy::kP2P;
        o.transport = Transport::kNvlink;
        o.fusion = fusion;
        const Plan plan = make_plan(src, src.with_placements(parse_placements(to)), DType::kF32, o);
        for (bool graph : {false, true}) {
          RunOptions r;
          r.backend = Backend::kNccl;
          r.warmup = 20;
          r.iters = static_cast<int>(iters);
          r.cuda_graph = graph;
          r.graph_calls = 1;  // ranks sharing a GPU: graphs of several calls can stall (docs/transports.md)
          const RunResult res = run_shared_gpus(plan, r);
          std::printf("%-8s %-10s %-10s %-8s %-6s %10.1f %10.1f %8lld\n", from.c_str(), to.c_str(),
                      to_string(Dims{n, n}).c_str(), !plan.steps().empty() && plan.steps()[0].fused ? "yes" : "no",
                      graph ? "graph" : "eager", res.timing.median_us, res.timing.p90_us,
                      static_cast<long long>(res.wrong_elements));
        }
      }
  return 0;
}
