// The Device and PeerLink defaults for programs that convert dtypes (backend.hpp): without a conversion they are the
// plain versions; a backend that converts overrides them.
#include "reshard/backend.hpp"

#include "reshard/text.hpp"

namespace reshard {
namespace {

void require_same(DType dtype, DType output_dtype, const char* what) {
  RESHARD_REQUIRE(dtype == output_dtype, "this device's ", what, " cannot convert ", to_string(dtype), " to ",
                  to_string(output_dtype));
}

}  // namespace

std::unique_ptr<CopyBatch> Device::prepare_copies(const Copies& copies, DType dtype, DType output_dtype) {
  require_same(dtype, output_dtype, "copies");
  return prepare_copies(copies, element_size(dtype));
}

std::unique_ptr<CopyBatch> Device::prepare_reductions(const std::vector<ReduceRegion>& regions, DType dtype,
                                                      DType output_dtype) {
  require_same(dtype, output_dtype, "reductions");
  return prepare_reductions(regions, dtype);
}

std::unique_ptr<CopyBatch> PeerLink::prepare_fused(const FusedPeerStep& op, DType dtype, DType output_dtype,
                                                   std::chrono::milliseconds timeout) {
  require_same(dtype, output_dtype, "fused steps");
  return prepare_fused(op, dtype, timeout);
}

}  // namespace reshard
