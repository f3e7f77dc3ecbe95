// A full consumer through the umbrella header: the version, a plan executed on the host backend with every element
// of every rank checked, and (in a package with the CUDA backend) a CUDA stream on the first GPU when there is one.
#include <cstdio>
#include <cstring>
#include <vector>

#include "reshard/reshard.hpp"

#define STR2(x) #x
#define STR(x) STR2(x)

int main() {
  using namespace reshard;
  const char* composed = STR(RESHARD_VERSION_MAJOR) "." STR(RESHARD_VERSION_MINOR) "." STR(RESHARD_VERSION_PATCH);
  if (std::strcmp(kVersionString, EXPECTED_VERSION) != 0 || std::strcmp(composed, EXPECTED_VERSION) != 0 ||
      RESHARD_VERSION_NUMBER != RESHARD_VERSION_MAJOR * 10000 + RESHARD_VERSION_MINOR * 100 + RESHARD_VERSION_PATCH) {
    std::printf("version header says %s (%s), the package %s\n", kVersionString, composed, EXPECTED_VERSION);
    return 1;
  }

  Mesh mesh({2, 2});
  Layout src(mesh, parse_placements("S0,S1"), Dims{37, 29});
  Layout dst = src.with_placements(parse_placements("R,S0"));
  Index wrong = 0, checked = 0;
  for (Strategy s : {Strategy::kCollective, Strategy::kP2P}) {
    PlanOptions options;
    options.strategy = s;
    Plan plan = make_plan(src, dst, DType::kBF16, options);
    HostWorld world(mesh.size());
    std::vector<Index> bad(mesh.size(), 0);
    run_ranks(
        mesh.size(),
        [&](int rank) {
          HostCommunicator comm(world, rank);
          HostDevice device;
          Executor exec(plan, comm, device);
          std::vector<std::byte> in(exec.input_bytes()), out(exec.output_bytes());
          fill_pattern(in.data(), src.box(rank), src.global_shape(), DType::kBF16);
          exec.run({in.data(), in.size()}, {out.data(), out.size()}, nullptr);
          bad[rank] = count_mismatches(out.data(), dst.box(rank), dst.global_shape(), DType::kBF16);
        },
        &world);
    for (int r = 0; r < mesh.size(); ++r) {
      wrong += bad[r];
      checked += dst.local_volume(r);
    }
  }
  std::printf("reshard %s: %lld elements checked, %lld wrong\n", kVersionString, static_cast<long long>(checked),
              static_cast<long long>(wrong));
  // Two strategies; [R,S0] holds the 37x29 tensor twice (once per coordinate of the replicated mesh dim).
  if (wrong != 0 || checked != 2 * 2 * 37 * 29) return 1;

#if defined(RESHARD_HAVE_CUDA)
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) {
    std::printf("CUDA backend linked; no GPU here\n");
  } else {
    CudaStream stream(0);
    stream.synchronize();
    std::printf("CUDA backend linked; a stream on GPU 0 of %d\n", gpus);
  }
#endif
  return 0;
}
