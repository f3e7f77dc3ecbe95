// A full consumer through the umbrella header: the version, a plan, and (in a package with the CUDA backend) a CUDA
// stream on the first GPU when there is one. The repository's examples (examples/*.cpp: plans executed on the host
// backend, every element of every rank checked) are built against the installed package beside it.
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
  const Layout src(Mesh({2, 2}), parse_placements("S0,S1"), Dims{37, 29});
  const Plan plan = make_plan(src, src.with_placements(parse_placements("R,S0")), DType::kBF16);
  std::printf("reshard %s: %s plan of %zu steps\n", kVersionString, std::string(to_string(plan.strategy())).c_str(),
              plan.steps().size());
  if (plan.steps().empty()) return 1;

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
