#include "reshard/calibrate.hpp"
#include "reshard/error.hpp"

namespace reshard {

Calibration calibrate(const CalibrateOptions&) {
  fail(ErrorKind::kInvalidArgument, "calibrate needs 2 GPUs and this reshard was built without CUDA/NCCL");
}

Calibration calibrate_between_processes(const CalibrateOptions&, int, int, const std::string&) {
  fail(ErrorKind::kInvalidArgument, "calibrate needs a GPU per process and this reshard was built without CUDA/NCCL");
}

}  // namespace reshard
