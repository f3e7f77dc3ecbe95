// How a sharding runtime that already holds the NCCL communicator of its TP group redistributes a tensor with
// reshard: plan once, prepare once, run many times (or capture in a CUDA graph). Here the "runtime" is one
// process with one thread per GPU; with one process per GPU only the communicator's creation differs.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <thread>
#include <vector>

#include "reshard/cuda_device.hpp"
#include "reshard/cuda_pattern.hpp"
#include "reshard/executor.hpp"
#include "reshard/nccl_communicator.hpp"
#include "reshard/planner.hpp"

int main() {
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus < 2) {
    std::printf("needs 2 GPUs; skipping\n");
    return 77;  // ctest: skipped
  }
  // The runtime's own communicators (one per GPU), created as it would create them.
  std::vector<ncclComm_t> tp(2);
  if (ncclCommInitAll(tp.data(), 2, nullptr) != ncclSuccess) return 1;

  // 1. Plan: [S0] -> [S1] of a 8192 x 4096 bf16 tensor on a 1-D mesh of the 2 ranks.
  reshard::Mesh mesh({2});
  reshard::Layout src(mesh, reshard::parse_placements("S0"), reshard::Dims{8192, 4096});
  reshard::Layout dst = src.with_placements(reshard::parse_placements("S1"));
  reshard::Plan plan = reshard::make_plan(src, dst, reshard::DType::kBF16);  // auto: the cheapest candidate

  std::vector<long long> wrong(2, 0);
  auto rank_main = [&](int rank) {
    // 2. Prepare on each rank: wrap the runtime's communicator (not owned), allocate workspace, upload descriptors.
    reshard::NcclCommunicator comm(tp[rank], /*owned=*/false);
    reshard::CudaDevice device(rank);
    reshard::CudaStream stream(rank);
    reshard::Executor exec(plan, comm, device);
    auto in = device.allocate(exec.input_bytes()), out = device.allocate(exec.output_bytes());
    reshard::CudaPatternChecker pattern(device);  // the deterministic test tensor, to check the result
    pattern.fill(in->data(), src.box(rank), src.global_shape(), reshard::DType::kBF16, stream.get());
    // 3. Run: enqueues only (no allocation, no host sync); wait() polls with a timeout instead of hanging.
    for (int i = 0; i < 3; ++i) exec.run({in->data(), in->bytes()}, {out->data(), out->bytes()}, stream.handle());
    exec.wait(stream.handle());
    wrong[rank] =
        pattern.count_mismatches(out->data(), dst.box(rank), dst.global_shape(), reshard::DType::kBF16, stream.get());
  };
  try {
    std::thread t0(rank_main, 0), t1(rank_main, 1);
    t0.join();
    t1.join();
  } catch (const reshard::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  for (ncclComm_t c : tp) ncclCommDestroy(c);
  std::printf("%s plan, %.1f us estimated; wrong elements: %lld\n",
              std::string(reshard::to_string(plan.strategy())).c_str(), plan.estimated_us(), wrong[0] + wrong[1]);
  return wrong[0] + wrong[1] == 0 ? 0 : 1;
}
