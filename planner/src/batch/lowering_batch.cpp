// Lowering a batch (plan_batch.hpp): every plan lowered for the rank as alone (lowering_parts.hpp), its buffers placed
// in the batch's (tensor t's input and output are tensor t's; its workspace at its own offset in the batch's), and
// step k of every plan merged into one step before scheduling, so that each stage of the merged step is one group of
// sends and receives, one pack batch and one unpack batch.
//
// Units: the batch's program has dtype u8: copies and exchanges count bytes (a copy region of element size e is the
// same region over bytes: innermost extent and outer strides times e). Reductions and collectives keep their tensor's
// dtype (set on the operation) and count its elements; every workspace offset they use is a multiple of 256 bytes plus
// a multiple of their element size. A converting batch (every member converts one pair, PlanBatch::converts) keeps
// its members' dtype instead: everything counts elements of it, outputs elements of the target dtype, and every
// copy into an output runs on the converting copy kernel (convert_on_kernels), as in a converting plan's program.
#include <algorithm>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <unordered_map>

#include "lowering/lowering_parts.hpp"
#include "reshard/plan_batch.hpp"

namespace reshard {
namespace detail {
namespace {

constexpr size_t kEngineCopiesPerStep = 4;       // local copies of a batch step the copy engines take, one call each
constexpr Index kKernelPeerCopyBytes = 4 << 20;  // see merged_syncs
constexpr Index kWorkAlign = 256;                // bytes: every tensor's workspace and the staging area start aligned
constexpr Index kRunAlign =
    8;  // bytes: a message joins the previous one's send only where it starts this aligned (any element)

Index align_up(Index x, Index a) { return checked_add(x, a - 1, "a batch's workspace") / a * a; }

// Where tensor `tensor`'s buffers lie in the batch: its element size in program units and its workspace's offset in
// them.
struct Place {
  int tensor = 0;
  int es = 1;
  Index work_base = 0;
};

// A peer's workspace reference stays relative to the peer's part for the tensor (RankProgram::tensor_work_offsets).
BufferRef in_bytes(BufferRef r, const Place& p) {
  if (r.buffer == Buffer::kWork && r.peer >= 0) {
    r.offset *= p.es;
    r.tensor = p.tensor;
  } else if (r.buffer == Buffer::kWork) {
    r.offset = r.offset * p.es + p.work_base;
  } else {
    r.offset *= p.es;
    r.tensor = p.tensor;
  }
  return r;
}

BufferRef in_elements(BufferRef r, const Place& p) {
  if (r.buffer == Buffer::kWork && r.peer < 0)
    r.offset += p.work_base / p.es;
  else
    r.tensor = p.tensor;
  return r;
}

void place(CopyRegion& c, const Place& p) {
  c.src = in_bytes(c.src, p);
  c.dst = in_bytes(c.dst, p);
  const int nd = c.shape.size();
  if (nd == 0) return;
  c.shape[nd - 1] *= p.es;
  for (int d = 0; d + 1 < nd; ++d) {
    c.src_strides[d] *= p.es;
    c.dst_strides[d] *= p.es;
  }
}

void place(std::vector<CopyRegion>& cs, const Place& p) {
  for (CopyRegion& c : cs) place(c, p);
}

void place(std::vector<ReduceRegion>& rs, const Place& p, DType dtype) {
  for (ReduceRegion& r : rs) {
    r.dst = in_elements(r.dst, p);
    for (BufferRef& s : r.srcs) s = in_elements(s, p);
    r.dtype = dtype;
  }
}

void place(std::vector<PeerTransfer>& ts, const Place& p) {
  for (PeerTransfer& t : ts) {
    t.buffer = in_bytes(t.buffer, p);
    t.elements *= p.es;
  }
}

void place(StepParts& ps, const Place& p, DType dtype) {
  place(ps.local, p);
  place(ps.local_engine, p);
  if (ps.one_sided) {
    place(ps.one_sided->stage, p);
    place(ps.one_sided->engine_copies, p);
    place(ps.one_sided->kernel_copies, p);
    place(ps.one_sided->reduce, p, dtype);
  }
  for (StageParts& s : ps.stages) {
    place(s.pack, p);
    place(s.unpack, p);
    place(s.sends, p);
    place(s.recvs, p);
    place(s.reduce, p, dtype);
    if (s.collective) {
      s.collective->send = in_elements(s.collective->send, p);
      s.collective->recv = in_elements(s.collective->recv, p);
      s.collective->dtype = dtype;
    }
  }
}

template <class T>
void append(std::vector<T>& to, std::vector<T>& from) {
  to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
}

void merge_into(StageParts& to, StageParts& from) {
  append(to.pack, from.pack);
  append(to.unpack, from.unpack);
  append(to.sends, from.sends);
  append(to.recvs, from.recvs);
  append(to.reduce, from.reduce);
  append(to.sends_staging, from.sends_staging);
  append(to.recvs_staging, from.recvs_staging);
}

// Whether a message joins others: staged on both sides anyway, or small enough to be staged for it. Both ranks of a
// message decide alike (the same size; the flags mirrored).
bool joins(const PeerTransfer& t, unsigned char staging, Index max_bytes) {
  return t.elements > 0 && ((staging & kStagedHere && staging & kStagedThere) || t.elements <= max_bytes);
}

// Lays the joining messages of `list` out in the staging area (from byte `cursor`), peer by peer, each peer's in list
// order one after the other, and replaces each run of adjacent ones by one message at the place of its first. Both
// ranks of a pair see the same joining messages (sizes) in the same order, so they form the same runs. A message
// already staged on this side moves its area (recorded in `moved`: old byte offset -> new); one that was not gets a
// contiguous copy into the area (`sending`) or out of it.
std::vector<PeerTransfer> coalesce(const std::vector<PeerTransfer>& list, const std::vector<unsigned char>& staging,
                                   bool sending, Index max_bytes, Index staging_base, Index& cursor,
                                   std::unordered_map<Index, Index>& moved, std::vector<CopyRegion>& copies) {
  RESHARD_REQUIRE(staging.size() == list.size(), "internal: staging flags do not match the messages");
  std::map<int, std::vector<size_t>> by_peer;
  for (size_t j = 0; j < list.size(); ++j)
    if (joins(list[j], staging[j], max_bytes)) by_peer[list[j].peer].push_back(j);
  // run_of[j]: the message that carries j (its run's first); -1: j is left as it is.
  std::vector<long> run_of(list.size(), -1);
  std::vector<PeerTransfer> runs(list.size());
  for (const auto& [peer, members] : by_peer) {
    long first = -1;
    for (size_t j : members) {
      if (first >= 0 && cursor % kRunAlign != 0) first = -1;  // not aligned: a new run
      cursor = align_up(cursor, kRunAlign);
      const BufferRef at{Buffer::kWork, staging_base + cursor};
      const PeerTransfer& t = list[j];
      if (staging[j] & kStagedHere) {
        moved[t.buffer.offset] = at.offset;
      } else {
        const Dims shape{t.elements}, one{1};
        copies.push_back(sending ? CopyRegion{t.buffer, at, shape, one, one}
                                 : CopyRegion{at, t.buffer, shape, one, one});
      }
      if (first < 0) {
        first = static_cast<long>(j);
        runs[j] = PeerTransfer{peer, at, 0};
      }
      runs[first].elements += t.elements;
      run_of[j] = first;
      cursor = checked_add(cursor, t.elements, "a batch's staging area");
    }
  }
  std::vector<PeerTransfer> out;
  for (size_t j = 0; j < list.size(); ++j) {
    if (run_of[j] < 0)
      out.push_back(list[j]);
    else if (run_of[j] == static_cast<long>(j))
      out.push_back(runs[j]);
  }
  return out;
}

void relocate(BufferRef& r, const std::unordered_map<Index, Index>& moved, int es) {
  if (r.buffer != Buffer::kWork || r.peer >= 0) return;
  auto it = moved.find(r.offset * es);
  if (it != moved.end()) r.offset = it->second / es;
}

// One merged exchange stage's messages coalesced (see coalesce), its packs and unpacks pointed at the new areas.
void coalesce_stage(StageParts& s, Index max_bytes, Index staging_base, Index& cursor, int unit) {
  std::unordered_map<Index, Index> moved;
  std::vector<CopyRegion> packs, unpacks;
  const Index max_units = max_bytes / unit;
  s.sends = coalesce(s.sends, s.sends_staging, true, max_units, staging_base, cursor, moved, packs);
  s.recvs = coalesce(s.recvs, s.recvs_staging, false, max_units, staging_base, cursor, moved, unpacks);
  s.sends_staging.assign(s.sends.size(), 0);
  s.recvs_staging.assign(s.recvs.size(), 0);
  if (!moved.empty()) {
    for (CopyRegion& c : s.pack) relocate(c.dst, moved, 1);
    for (CopyRegion& c : s.unpack) relocate(c.src, moved, 1);
    for (ReduceRegion& r : s.reduce)
      for (BufferRef& src : r.srcs) relocate(src, moved, element_size(*r.dtype) / unit);
  }
  append(s.pack, packs);
  append(s.unpack, unpacks);
}

bool has_collective(const StageParts& s) { return s.collective.has_value(); }

// A member's one-sided part joins the step's: its copies and reductions, and the ranks it meets (`partners`). The
// merged step meets every partner in both phases, both ways (merged_syncs), so members that push, members that pull
// and staged members share one ready and one done: every rank has posted ready before anyone copies, and no rank
// leaves the step before every rank it copies to or from has finished.
void merge_one_sided(OneSidedParts& to, OneSidedParts& from, std::vector<int>& partners) {
  if (!from.stage.empty()) {
    to.stage_engine = to.stage.empty() ? from.stage_engine : CopyEngine::kKernel;  // mixed: one kernel for all
    append(to.stage, from.stage);
  }
  append(to.engine_copies, from.engine_copies);
  append(to.kernel_copies, from.kernel_copies);
  append(to.reduce, from.reduce);
  for (const PeerSync* sync : {&from.ready, &from.done})
    for (const std::vector<int>* list : {&sync->notify, &sync->await})
      partners.insert(partners.end(), list->begin(), list->end());
}

void merged_syncs(OneSidedParts& one, std::vector<int> partners, int unit) {
  std::sort(partners.begin(), partners.end());
  partners.erase(std::unique(partners.begin(), partners.end()), partners.end());
  one.ready = PeerSync{SyncPhase::kReady, partners, partners};
  one.done = PeerSync{SyncPhase::kDone, partners, partners};
  // Past kEngineCopiesPerStep peer copies, those of at most kKernelPeerCopyBytes go to the one copy kernel (a
  // copy-engine call each costs more host time than such a copy takes).
  if (one.engine_copies.size() > kEngineCopiesPerStep) {
    std::vector<CopyRegion> engines;
    for (CopyRegion& c : one.engine_copies)
      (c.shape.product() * unit <= kKernelPeerCopyBytes ? one.kernel_copies : engines).push_back(std::move(c));
    one.engine_copies = std::move(engines);
  }
  std::stable_sort(one.reduce.begin(), one.reduce.end(),
                   [](const ReduceRegion& a, const ReduceRegion& b) { return *a.dtype < *b.dtype; });
}

}  // namespace
}  // namespace detail

RankProgram lower(const PlanBatch& batch, int rank, const LowerOptions& options) {
  if (batch.size() == 1) return lower(batch.plan(0), rank, options);
  using namespace detail;
  RankProgram prog;
  prog.rank = rank;
  prog.dtype = batch.converts() ? batch.plan(0).dtype() : DType::kU8;
  if (batch.converts()) prog.output_dtype = batch.plan(0).target_dtype();
  const int unit = element_size(prog.dtype);  // bytes per program unit
  std::vector<LoweredParts> parts;
  std::vector<Place> places(batch.size());
  parts.reserve(batch.size());
  for (size_t t = 0; t < batch.size(); ++t) {
    parts.push_back(lower_parts(batch.plan(t), rank, /*gathers_as_exchanges=*/true, options.one_sided));
    if (is_identity(batch.plan(t))) {  // no operations and no workspace (RankProgram::identity_tensors)
      prog.identity_tensors.push_back(static_cast<int>(t));
      parts.back().steps.clear();
      parts.back().later.clear();
      parts.back().program.work_elements = 0;
      continue;
    }
    prog.one_sided = prog.one_sided || parts.back().program.one_sided;
  }
  Index work = 0;
  for (size_t t = 0; t < batch.size(); ++t) {
    const int es = element_size(parts[t].program.dtype) / unit;
    places[t] = Place{static_cast<int>(t), es, work};
    prog.tensor_work_offsets.push_back(checked_mul(work, unit, "a batch's workspace"));
    work = align_up(checked_add(work, checked_mul(parts[t].program.work_elements, es, "a batch's workspace"),
                                "a batch's workspace"),
                    kWorkAlign);
  }
  for (size_t t = 0; t < batch.size(); ++t) {
    const RankProgram& p = parts[t].program;
    const int es = element_size(p.dtype), out_es = element_size(p.output_dtype.value_or(p.dtype));
    prog.tensor_input_bytes.push_back(checked_mul(p.input_elements, es, "a tensor's size"));
    prog.tensor_output_bytes.push_back(checked_mul(p.output_elements, out_es, "a tensor's size"));
    // The batch's totals in its units: bytes, or a converting batch's elements (of the dtype in, of the target out).
    prog.input_elements =
        checked_add(prog.input_elements, checked_mul(p.input_elements, es, "a tensor's size") / unit, "a batch's size");
    prog.output_elements = checked_add(
        prog.output_elements, batch.converts() ? p.output_elements : prog.tensor_output_bytes.back(), "a batch's size");
  }
  const Index staging_base = work;
  Index staging_peak = 0;
  prog.step_count = batch.step_count();
  // Step k's parts of every member (`phase(t)`: the member's parts, or null) merged and scheduled: their local copies,
  // one exchange per stage with messages coalesced, their collectives, and one one-sided part.
  auto schedule_merged = [&](int k, const std::function<StepParts*(size_t)>& phase) {
    StepParts merged;
    std::vector<StageParts> exchanges, collectives;
    std::optional<OneSidedParts> one;
    std::vector<int> partners;
    for (size_t t = 0; t < batch.size(); ++t) {
      StepParts* member = phase(t);
      if (member == nullptr) continue;
      StepParts& ps = *member;
      place(ps, places[t], parts[t].program.dtype);
      append(merged.local, ps.local);
      append(merged.local_engine, ps.local_engine);
      if (ps.one_sided) {
        if (!one) one.emplace();
        merge_one_sided(*one, *ps.one_sided, partners);
      }
      size_t e = 0;
      for (StageParts& s : ps.stages) {
        if (has_collective(s)) {
          collectives.push_back(std::move(s));
          continue;
        }
        if (exchanges.size() <= e) exchanges.resize(e + 1);
        merge_into(exchanges[e++], s);
      }
    }
    // Each copy-engine copy is a call of its own (about 5 us each: 100 local copies of 1 MiB take 17 times as long as
    // one of 100 MiB); past kEngineCopiesPerStep the step's local copies all join the kernel's, which copies every
    // region in one launch.
    if (merged.local_engine.size() > kEngineCopiesPerStep) {
      append(merged.local, merged.local_engine);
      merged.local_engine.clear();
    }
    Index cursor = 0;
    for (StageParts& s : exchanges) {
      coalesce_stage(s, options.coalesce_max_bytes, staging_base, cursor, unit);
      std::stable_sort(s.reduce.begin(), s.reduce.end(),
                       [](const ReduceRegion& a, const ReduceRegion& b) { return *a.dtype < *b.dtype; });
    }
    staging_peak = std::max(staging_peak, cursor);
    for (const StageParts& s : collectives)
      if (const GroupSpec g = group_of(*s.collective);
          std::find(prog.communicators.begin(), prog.communicators.end(), g) == prog.communicators.end())
        prog.communicators.push_back(g);
    merged.stages = std::move(exchanges);
    append(merged.stages, collectives);
    if (!one) {
      schedule_step(std::move(merged), k, unit, options.stage_schedule, prog.ops);
      return;
    }
    // The members on NCCL first, then the one-sided ones with every local copy of the step.
    if (!merged.stages.empty()) {
      StepParts two_sided;
      two_sided.stages = std::move(merged.stages);
      schedule_step(std::move(two_sided), k, unit, options.stage_schedule, prog.ops);
    }
    merged_syncs(*one, std::move(partners), unit);
    merged.stages.clear();
    merged.one_sided = std::move(one);
    schedule_step(std::move(merged), k, unit, options.stage_schedule, prog.ops);
  };
  for (int k = 0; k < prog.step_count; ++k) {
    const size_t step = static_cast<size_t>(k);
    schedule_merged(k, [&](size_t t) { return step < parts[t].steps.size() ? &parts[t].steps[step] : nullptr; });
    // The members' later phases of step k (LoweredParts::later), phase by phase once every member's phase before is
    // done: their staging reuses the step's, as a single plan's later phases reuse its scratch.
    for (size_t phase = 0;; ++phase) {
      auto phase_of = [&](size_t t) -> StepParts* {
        if (step >= parts[t].later.size() || phase >= parts[t].later[step].size()) return nullptr;
        return &parts[t].later[step][phase];
      };
      bool any = false;
      for (size_t t = 0; t < batch.size(); ++t) any = any || phase_of(t) != nullptr;
      if (!any) break;
      schedule_merged(k, phase_of);
    }
  }
  prog.work_elements = staging_peak > 0
                           ? align_up(checked_add(staging_base, staging_peak, "a batch's workspace"), kWorkAlign)
                           : staging_base;
  if (prog.output_dtype) convert_on_kernels(prog);
  std::vector<const Plan*> plans;
  for (const auto& p : batch.plans()) plans.push_back(p.get());
  set_plan_facts(plans, options.one_sided, prog);
  return prog;
}

}  // namespace reshard
