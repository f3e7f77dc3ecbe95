#include "lowering/op_schedule.hpp"

#include <algorithm>
#include <iterator>
#include <utility>

namespace reshard::detail {
namespace {

class StepOps {
 public:
  StepOps(std::vector<Op>& ops, int step) : ops_(ops), step_(step) {}

  // Appends an operation and returns its index.
  int add(OpBody body, Lane lane, std::vector<int> after = {}) {
    ops_.push_back(Op{std::move(body), lane, std::move(after), step_});
    return static_cast<int>(ops_.size()) - 1;
  }
  int copies(std::vector<CopyRegion> regions, Lane lane, std::vector<int> after = {},
             CopyEngine engine = CopyEngine::kKernel, bool beside = false) {
    return add(Copies{std::move(regions), engine, beside}, lane, std::move(after));
  }
  // One operation per run of regions of one dtype (a batch's stage mixes tensors); returns the last.
  int reductions(std::vector<ReduceRegion> regions, Lane lane, std::vector<int> after) {
    int last = -1;
    for (size_t b = 0; b < regions.size();) {
      size_t e = b + 1;
      while (e < regions.size() && regions[e].dtype == regions[b].dtype) ++e;
      std::vector<ReduceRegion> run(std::make_move_iterator(regions.begin() + b),
                                    std::make_move_iterator(regions.begin() + e));
      last = add(Reductions{std::move(run)}, lane, last < 0 ? after : std::vector<int>{});
      b = e;
    }
    return last;
  }
  // A point on the main lane that side lanes start from.
  int fork() { return add(Mark{}, Lane::kMain); }
  void join(std::vector<int> waits) {
    std::erase(waits, -1);
    if (!waits.empty()) add(Mark{}, Lane::kMain, std::move(waits));
  }

 private:
  std::vector<Op>& ops_;
  int step_;
};

bool has_communication(const StageParts& s) { return !s.sends.empty() || !s.recvs.empty() || s.collective; }

OpBody communication(StageParts& s) {
  if (s.collective) return std::move(*s.collective);
  return Exchange{std::move(s.sends), std::move(s.recvs)};
}

// Starts local copies on their lane from `fork` (a point on the main lane; made here when -1); returns the last
// operation on that lane, or -1 when there are none.
int start_local(StepOps& out, StepParts& parts, int fork = -1) {
  if (parts.local.empty() && parts.local_engine.empty()) return -1;
  if (fork < 0) fork = out.fork();
  int last = -1;
  if (!parts.local_engine.empty())
    last = out.copies(std::move(parts.local_engine), Lane::kLocalCopy, {fork}, CopyEngine::kCopyEngine, true);
  if (!parts.local.empty())
    last = out.copies(std::move(parts.local), Lane::kLocalCopy, last < 0 ? std::vector<int>{fork} : std::vector<int>{},
                      CopyEngine::kKernel, true);
  return last;
}

void schedule_one_sided(StepOps& out, StepParts& parts, int step, int element_size) {
  OneSidedParts& p = *parts.one_sided;
  // Staging precedes the ready post (stream order on the main lane), so "ready" covers the staged copy.
  if (!p.stage.empty()) out.copies(std::move(p.stage), Lane::kMain, {}, p.stage_engine);
  if (p.fused) {
    FusedPeerStep f{std::move(parts.local_engine), std::move(p.ready), std::move(p.done), step, std::move(p.reduce)};
    for (auto* list : {&parts.local, &p.engine_copies, &p.kernel_copies})
      f.regions.insert(f.regions.end(), list->begin(), list->end());
    out.add(std::move(f), Lane::kMain);
    return;
  }
  // Large local copies overlap the step on their lane; small ones run on the main lane after the peers' part (a lane's
  // fork and join cost four stream calls, more than a small copy takes).
  const bool small_local =
      (copy_elements(parts.local) + copy_elements(parts.local_engine)) * element_size <= kOverlapLocalBytes;
  const int local = small_local ? -1 : start_local(out, parts);
  out.add(std::move(p.ready), Lane::kMain);
  if (!p.engine_copies.empty()) out.copies(std::move(p.engine_copies), Lane::kMain, {}, CopyEngine::kCopyEngine);
  if (!p.kernel_copies.empty()) out.copies(std::move(p.kernel_copies), Lane::kMain);
  if (!p.reduce.empty()) out.reductions(std::move(p.reduce), Lane::kMain, {});
  if (small_local) {
    if (!parts.local_engine.empty())
      out.copies(std::move(parts.local_engine), Lane::kMain, {}, CopyEngine::kCopyEngine);
    if (!parts.local.empty()) out.copies(std::move(parts.local), Lane::kMain);
  }
  out.add(std::move(p.done), Lane::kMain);
  out.join({local});
}

}  // namespace

void split_engine_copies(std::vector<CopyRegion>& regions, int element_size, Index max_bytes) {
  std::vector<CopyRegion> out;
  out.reserve(regions.size());
  for (CopyRegion& r : regions) {
    const Index bytes = r.shape.product() * element_size;
    if (bytes <= max_bytes || r.shape.size() == 0 || r.shape[0] <= 1) {
      out.push_back(std::move(r));
      continue;
    }
    const Index slice = bytes / r.shape[0];  // bytes of one index of the outermost dim
    const Index per = std::max<Index>(1, max_bytes / slice);
    for (Index begin = 0; begin < r.shape[0]; begin += per) {
      CopyRegion piece = r;
      piece.shape[0] = std::min(per, r.shape[0] - begin);
      piece.src.offset += begin * r.src_strides[0];
      piece.dst.offset += begin * r.dst_strides[0];
      out.push_back(std::move(piece));
    }
  }
  regions = std::move(out);
}

void schedule_step(StepParts parts, int step, int element_size, StageSchedule schedule, std::vector<Op>& ops) {
  StepOps out(ops, step);
  if (parts.one_sided && !parts.stages.empty()) {  // mixed: the two-sided stages on the pack lane, beside
    const int fork = out.fork();
    std::vector<int> first{fork};  // what the pack lane's first operation waits for
    int last = -1;
    for (StageParts& s : parts.stages) {
      if (!s.pack.empty())
        last = out.copies(std::move(s.pack), Lane::kPack, std::exchange(first, {}), CopyEngine::kKernel, true);
      last = out.add(communication(s), Lane::kPack, std::exchange(first, {}));
      if (!s.unpack.empty())
        last = out.copies(std::move(s.unpack), Lane::kPack, std::exchange(first, {}), CopyEngine::kKernel, true);
      if (!s.reduce.empty()) last = out.reductions(std::move(s.reduce), Lane::kPack, std::exchange(first, {}));
    }
    schedule_one_sided(out, parts, step, element_size);
    return out.join({last});
  }
  if (parts.one_sided) return schedule_one_sided(out, parts, step, element_size);
  std::vector<StageParts>& stages = parts.stages;
  if (!parts.local_engine.empty() && stages.empty()) {  // nothing else to do: the copy engines on the main lane
    out.copies(std::move(parts.local_engine), Lane::kMain, {}, CopyEngine::kCopyEngine);
    parts.local_engine.clear();
  }
  const bool overlap_local = !stages.empty() && copy_elements(parts.local) * element_size > kOverlapLocalBytes;
  if (!overlap_local && !parts.local.empty()) {  // small local copies ride in the first pack launch
    if (stages.empty()) stages.emplace_back();
    stages.front().pack.insert(stages.front().pack.end(), parts.local.begin(), parts.local.end());
    parts.local.clear();
  }
  auto unpack_on = [&](StageParts& s, Lane lane, std::vector<int> after, bool beside) {
    int last = -1;
    if (!s.unpack.empty()) last = out.copies(std::move(s.unpack), lane, std::move(after), CopyEngine::kKernel, beside);
    if (!s.reduce.empty()) last = out.reductions(std::move(s.reduce), lane, last < 0 ? after : std::vector<int>{});
    return last;
  };

  if (stages.size() <= 1) {
    // Pack -> large local copies start on their lane, overlapping the communication (not the pack, which would
    // compete for memory bandwidth) -> communication -> unpack.
    StageParts* s = stages.empty() ? nullptr : &stages.front();
    if (s && !s->pack.empty()) out.copies(std::move(s->pack), Lane::kMain);
    const int local = start_local(out, parts);
    if (s && has_communication(*s)) out.add(communication(*s), Lane::kMain);
    if (s) unpack_on(*s, Lane::kMain, {}, false);
    return out.join({local});
  }

  if (schedule == StageSchedule::kSerial) {
    const int local = start_local(out, parts);
    for (StageParts& s : stages) {
      if (!s.pack.empty()) out.copies(std::move(s.pack), Lane::kMain);
      out.add(communication(s), Lane::kMain);
      unpack_on(s, Lane::kMain, {}, false);
    }
    return out.join({local});
  }
  // Lanes: stage s is packed on the pack lane while stage s-1 is on the wire and unpacked on the unpack lane while
  // stage s+1 is; stages s and s-2 share a scratch slot (chunking.hpp), so stage s packs once stage s-2 has sent and
  // receives once stage s-2 is unpacked.
  const int fork = out.fork();
  const int local = start_local(out, parts, fork);
  std::vector<int> sent(stages.size(), -1), drained(stages.size(), -1);
  bool pack_lane_started = false;
  int last_unpack = -1;
  for (size_t i = 0; i < stages.size(); ++i) {
    StageParts& s = stages[i];
    std::vector<int> comm_after;
    if (!s.pack.empty()) {
      std::vector<int> pack_after;
      if (!pack_lane_started) pack_after.push_back(fork);
      if (i >= 2) pack_after.push_back(sent[i - 2]);
      pack_lane_started = true;
      comm_after.push_back(
          out.copies(std::move(s.pack), Lane::kPack, std::move(pack_after), CopyEngine::kKernel, true));
    }
    if (i >= 2 && drained[i - 2] >= 0) comm_after.push_back(drained[i - 2]);
    sent[i] = out.add(communication(s), Lane::kMain, std::move(comm_after));
    drained[i] = unpack_on(s, Lane::kUnpack, {sent[i]}, true);
    if (drained[i] >= 0) last_unpack = drained[i];
  }
  out.join({last_unpack, local});
}

}  // namespace reshard::detail

namespace reshard {

Index copy_elements(const std::vector<CopyRegion>& regions) {
  Index n = 0;
  for (const CopyRegion& r : regions) n += r.shape.product();
  return n;
}

}  // namespace reshard
