// Builds without CUDA: the NCCL backend is never available.
#include "reshard/harness.hpp"

namespace reshard {

int local_gpu_count() { return 0; }
bool nccl_available(int) { return false; }
Index device_free_bytes(int) { return 0; }

struct NcclRanks {};

NcclRanks* make_nccl_ranks(int, std::chrono::milliseconds, NcclMode) {
  fail(ErrorKind::kInvalidArgument, "this reshard was built without CUDA/NCCL: use the host backend");
}

void destroy_nccl_ranks(NcclRanks* ranks) { delete ranks; }

RunResult run_nccl(NcclRanks&, const PlanBatch&, const RunOptions&) {
  fail(ErrorKind::kInvalidArgument, "this reshard was built without CUDA/NCCL: use the host backend");
}

struct ProcessRunner::State {};

ProcessRunner::ProcessRunner(int rank, int world_size, int device, const std::string&, std::chrono::milliseconds,
                             NcclMode)
    : rank_(rank), world_size_(world_size), device_(device) {
  fail(ErrorKind::kInvalidArgument, "this reshard was built without CUDA/NCCL: multi-process runs need NCCL");
}

ProcessRunner::~ProcessRunner() = default;

RunResult ProcessRunner::run(const Plan&, const RunOptions&) {
  fail(ErrorKind::kInvalidArgument, "this reshard was built without CUDA/NCCL: multi-process runs need NCCL");
}

RunResult run_plan_process(const Plan&, int, int, int, const std::string&, const RunOptions&) {
  fail(ErrorKind::kInvalidArgument, "this reshard was built without CUDA/NCCL: multi-process runs need NCCL");
}

RunResult run_shared_gpus(const Plan&, const RunOptions&) {
  fail(ErrorKind::kInvalidArgument, "this reshard was built without CUDA: ranks sharing GPUs need one");
}

LinkMeasurement measure_links(size_t) {
  fail(ErrorKind::kInvalidArgument, "this reshard was built without CUDA/NCCL: no links to measure");
}

}  // namespace reshard
