// Programs that convert dtypes (RankProgram::output_dtype): copies into the output on kernels (lowering_parts.hpp).
#include <algorithm>

#include "lowering/lowering_parts.hpp"

namespace reshard::detail {

// The copy engines move bytes: copies that write an output buffer (this rank's or a peer's) of a program that
// converts run on the copy kernel, which converts. Nothing else may land in the output then (lower_steps stages it).
void convert_on_kernels(RankProgram& prog) {
  auto writes_output = [](const CopyRegion& r) { return r.dst.buffer == Buffer::kOutput; };
  for (Op& op : prog.ops) {
    if (auto* c = std::get_if<Copies>(&op.body)) {
      if (c->engine == CopyEngine::kCopyEngine && std::any_of(c->regions.begin(), c->regions.end(), writes_output))
        c->engine = CopyEngine::kKernel;
    } else if (const auto* x = std::get_if<Exchange>(&op.body)) {
      for (const PeerTransfer& t : x->recvs)
        RESHARD_REQUIRE(t.buffer.buffer != Buffer::kOutput, "internal: a converting program receives into its output");
    } else if (const auto* k = std::get_if<CollectiveOp>(&op.body)) {
      RESHARD_REQUIRE(k->recv.buffer != Buffer::kOutput,
                      "internal: a converting program's collective writes its output");
    }
  }
}

}  // namespace reshard::detail
