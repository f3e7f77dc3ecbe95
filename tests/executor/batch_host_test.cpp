// Batched redistribution on the host backend (plan_batch.hpp): lists of 1 to 50 tensors of mixed dtypes, layouts,
// strategies and sizes run through one executor (one merged program), every element of every tensor of every rank
// checked against the global tensor (harness protocol: two poisoned runs and a final run); what the merge makes
// (one exchange per stage, coalesced messages); and bad input.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <map>
#include <variant>

#include "batch_lists.hpp"
#include "host_runs.hpp"
#include "reshard/executor.hpp"
#include "reshard/harness.hpp"
#include "reshard/host_backend.hpp"
#include "reshard/pattern.hpp"
#include "reshard/plan_batch.hpp"
#include "reshard/plan_cache.hpp"
#include "reshard/plan_json.hpp"
#include "reshard/planner.hpp"

namespace reshard {
namespace {

using testing::batch_cases;
using testing::BatchCase;
using testing::Lcg;
using testing::random_plan;

// Every list is run twice: with the default coalescing, and with none (messages joined only where staged anyway) and
// serial stages.
class HostBatch : public ::testing::TestWithParam<BatchCase> {};

TEST_P(HostBatch, EveryTensorEveryElement) {
  const BatchCase& c = GetParam();
  Mesh mesh(c.mesh);
  Lcg rng(c.seed);
  std::vector<std::shared_ptr<const Plan>> plans;
  for (int i = 0; i < c.tensors; ++i) plans.push_back(random_plan(rng, mesh));
  PlanBatch batch(plans);
  Index expected = 0;
  for (const auto& p : plans)
    for (int rank = 0; rank < mesh.size(); ++rank) expected += volume(p->dst().box(rank));
  for (bool coalesce : {true, false}) {
    RunOptions o = testing::quick_host_run();
    if (!coalesce) {
      o.coalesce_max_bytes = 0;
      o.stage_schedule = StageSchedule::kSerial;
    }
    RunResult r = run_batch(batch, o);
    EXPECT_EQ(r.wrong_elements, 0) << r.first_error;
    EXPECT_EQ(r.checked_elements, 3 * expected);  // two poisoned runs and the final one
  }
}

// The same lists with one-sided members (nvlink, auto with peer access, changing buffers) among NCCL ones: their steps
// merge into one ready, one set of copies and one done per step, beside the NCCL members' exchanges.
TEST_P(HostBatch, OneSidedMembersEveryElement) {
  const BatchCase& c = GetParam();
  Mesh mesh(c.mesh);
  Lcg rng(c.seed + 1000);
  std::vector<std::shared_ptr<const Plan>> plans;
  int one_sided = 0;
  for (int i = 0; i < c.tensors; ++i) {
    plans.push_back(random_plan(rng, mesh, /*one_sided=*/true));
    for (const Step& s : plans.back()->steps()) one_sided += s.transport == Transport::kNvlink;
  }
  if (c.tensors >= 7 && mesh.size() > 1) {
    EXPECT_GT(one_sided, 0) << "no one-sided member drawn";
  }
  PlanBatch batch(plans);
  Index expected = 0;
  for (const auto& p : plans)
    for (int rank = 0; rank < mesh.size(); ++rank) expected += volume(p->dst().box(rank));
  RunResult r = run_batch(batch, testing::quick_host_run());
  EXPECT_EQ(r.wrong_elements, 0) << r.first_error;
  EXPECT_EQ(r.checked_elements, 3 * expected);
}

INSTANTIATE_TEST_SUITE_P(Lists, HostBatch, ::testing::ValuesIn(batch_cases()), [](const auto& param_info) {
  std::string name;
  for (int d : param_info.param.mesh) name += std::to_string(d) + "x";
  return name + std::to_string(param_info.param.tensors) + "t_seed" + std::to_string(param_info.param.seed);
});

// The lists above cover what a batch must merge: every step kind, plans of several steps next to plans of one,
// pipelined exchanges, Partial sources, empty tensors.
TEST(HostBatchCoverage, ListsMixEveryKind) {
  std::map<StepKind, int> kinds;
  int multi_step = 0, pipelined = 0, partial = 0, empty = 0;
  for (const BatchCase& c : batch_cases()) {
    Lcg rng(c.seed);
    for (int i = 0; i < c.tensors; ++i) {
      auto p = random_plan(rng, Mesh(c.mesh));
      for (const Step& s : p->steps()) ++kinds[s.kind];
      multi_step += p->steps().size() > 1;
      pipelined += p->pipeline_chunk_bytes() > 0 && p->communication_steps() > 0;
      partial += p->src().has_partial();
      empty += p->src().global_volume() == 0;
    }
  }
  for (StepKind k : {StepKind::kP2P, StepKind::kAllGather, StepKind::kAllToAll, StepKind::kReduceScatter,
                     StepKind::kAllReduce, StepKind::kLocal})
    EXPECT_GT(kinds[k], 0) << to_string(k);
  EXPECT_GT(multi_step, 0);
  EXPECT_GT(pipelined, 0);
  EXPECT_GT(partial, 0);
  EXPECT_GT(empty, 0);
}

// The merged program: one exchange per stage for every tensor, and messages staged on both sides between one pair of
// ranks sent as one.
TEST(HostBatchProgram, OneExchangeAndCoalescedMessages) {
  Mesh mesh({2});
  // S1 -> S0 on (2): each rank sends the other a block, strided on one side (staged there): small messages are staged
  // on both sides and the 20 tensors' messages to the peer become one.
  std::vector<BatchEntry> entries;
  for (int i = 0; i < 20; ++i)
    entries.push_back({Layout(mesh, {Placement::shard(1)}, Dims{6, 8}), Layout(mesh, {Placement::shard(0)}, Dims{6, 8}),
                       i % 2 ? DType::kF32 : DType::kBF16});
  PlanOptions o;
  o.strategy = Strategy::kP2P;
  o.transport = Transport::kNccl;
  PlanBatch batch = make_plan_batch(entries, o);
  const RankProgram prog = lower(batch, 0);
  int exchanges = 0;
  for (const Op& op : prog.ops) {
    if (const auto* e = std::get_if<Exchange>(&op.body)) {
      ++exchanges;
      EXPECT_EQ(e->sends.size(), 1u);
      EXPECT_EQ(e->recvs.size(), 1u);
    }
  }
  EXPECT_EQ(exchanges, 1);
  RunResult r = run_batch(batch, testing::quick_host_run());
  EXPECT_EQ(r.wrong_elements, 0) << r.first_error;
  EXPECT_GT(r.checked_elements, 0);
  // Coalescing off: messages staged on both sides anyway still join (S1 -> S2 of a 3-D tensor strides both sides);
  // the others go one by one.
  LowerOptions off;
  off.coalesce_max_bytes = 0;
  for (const Op& op : lower(batch, 1, off).ops)
    if (const auto* e = std::get_if<Exchange>(&op.body)) {
      EXPECT_EQ(e->sends.size(), 20u);
    }
  std::vector<BatchEntry> both;
  for (int i = 0; i < 5; ++i)
    both.push_back({Layout(mesh, {Placement::shard(1)}, Dims{2, 4, 4}),
                    Layout(mesh, {Placement::shard(2)}, Dims{2, 4, 4}), DType::kI64});
  PlanBatch strided = make_plan_batch(both, o);
  for (const Op& op : lower(strided, 0, off).ops)
    if (const auto* e = std::get_if<Exchange>(&op.body)) {
      EXPECT_EQ(e->sends.size(), 1u);
    }
  RunOptions ro = testing::quick_host_run();
  ro.coalesce_max_bytes = 0;
  for (const PlanBatch* b : {&batch, &strided}) {
    RunResult q = run_batch(*b, ro);
    EXPECT_EQ(q.wrong_elements, 0) << q.first_error;
  }
}

// Local copies of many tensors in one step: past a few, they run in one kernel launch instead of one copy-engine call
// each; few stay on the copy engines. Every element checked either way.
TEST(HostBatchProgram, ManyLocalCopiesRunInOneKernel) {
  Mesh mesh({2});
  auto engine_copies = [](const RankProgram& prog) {
    int regions = 0;
    for (const Op& op : prog.ops)
      if (const auto* c = std::get_if<Copies>(&op.body))
        if (c->engine == CopyEngine::kCopyEngine) regions += static_cast<int>(c->regions.size());
    return regions;
  };
  for (int tensors : {2, 40}) {
    // R -> S0 of an 8 x 512 f32 tensor: each rank keeps a contiguous half, rows of 2 KiB (a copy-engine region).
    std::vector<BatchEntry> entries(static_cast<size_t>(tensors),
                                    BatchEntry{Layout(mesh, {Placement::replicate()}, Dims{8, 512}),
                                               Layout(mesh, {Placement::shard(0)}, Dims{8, 512}), DType::kF32});
    const PlanBatch batch = make_plan_batch(entries, {});
    const RankProgram prog = lower(batch, 1);
    if (tensors == 2)
      EXPECT_EQ(engine_copies(prog), 2);
    else
      EXPECT_EQ(engine_copies(prog), 0);
    int kernel_regions = 0;
    for (const Op& op : prog.ops)
      if (const auto* c = std::get_if<Copies>(&op.body))
        if (c->engine == CopyEngine::kKernel) kernel_regions += static_cast<int>(c->regions.size());
    EXPECT_EQ(kernel_regions, tensors == 2 ? 0 : tensors);
    RunResult r = run_batch(batch, testing::quick_host_run());
    EXPECT_EQ(r.wrong_elements, 0) << r.first_error;
    EXPECT_GT(r.checked_elements, 0);
  }
}

// Members between identical layouts (is_identity) have no operations in the batch's program: run in place they cost
// nothing, as DTensor returns its input for an unchanged placement; with an output of their own they are copied
// whole. Every element of every tensor checked with the identity members in place, apart, and half of each.
TEST(HostBatchProgram, IdentityMembersRunInPlaceOrWhole) {
  const Mesh mesh({2, 2});
  const Placement s0 = Placement::shard(0), s1 = Placement::shard(1), r = Placement::replicate();
  const std::vector<BatchEntry> entries{
      {Layout(mesh, {s0, s1}, Dims{9, 7}), Layout(mesh, {s0, s1}, Dims{9, 7}), DType::kI32},
      {Layout(mesh, {s0, r}, Dims{6, 10}), Layout(mesh, {s1, s0}, Dims{6, 10}), DType::kF32},
      {Layout(mesh, {r, r}, Dims{5}), Layout(mesh, {r, r}, Dims{5}), DType::kU8},
      {Layout(mesh, {s1, s0}, Dims{4, 12}), Layout(mesh, {s1, s0}, Dims{4, 12}), DType::kBF16}};
  const PlanBatch batch = make_plan_batch(entries);
  const std::vector<int> identity{0, 2, 3};
  for (int rank = 0; rank < 4; ++rank) {
    const RankProgram prog = lower(batch, rank);
    EXPECT_EQ(prog.identity_tensors, identity);
    for (const Op& op : prog.ops)
      if (const auto* c = std::get_if<Copies>(&op.body))
        for (const CopyRegion& region : c->regions) {
          EXPECT_EQ(region.src.buffer == Buffer::kWork ? 1 : region.src.tensor, 1);
          EXPECT_EQ(region.dst.buffer == Buffer::kWork ? 1 : region.dst.tensor, 1);
        }
  }
  enum class Mode { kInPlace, kApart, kMixed };
  for (Mode mode : {Mode::kInPlace, Mode::kApart, Mode::kMixed}) {
    HostWorld world(4);
    std::vector<Index> wrong(4, -1);
    run_ranks(
        4,
        [&](int rank) {
          HostCommunicator comm(world, rank);
          HostDevice device;
          Executor exec(batch, comm, device);
          std::vector<std::vector<std::byte>> in(4), out(4);
          std::vector<ConstBuffer> ins;
          std::vector<MutableBuffer> outs;
          for (size_t t = 0; t < 4; ++t) {
            in[t].resize(exec.input_bytes(t));
            fill_local(in[t].data(), batch.plan(t).src(), rank, batch.plan(t).dtype());
            const bool in_place = t != 1 && (mode == Mode::kInPlace || (mode == Mode::kMixed && t == 0));
            if (!in_place) out[t].assign(exec.output_bytes(t), std::byte{0xA5});
            std::vector<std::byte>& target = in_place ? in[t] : out[t];
            ins.push_back({in[t].data(), in[t].size()});
            outs.push_back({target.data(), target.size()});
          }
          exec.run(ins, outs, nullptr);
          exec.wait(nullptr);
          Index n = 0;
          for (size_t t = 0; t < 4; ++t)
            n += count_local_mismatches(outs[t].data, batch.plan(t).src(), batch.plan(t).dst(), rank,
                                        batch.plan(t).dtype());
          wrong[rank] = n;
        },
        &world);
    for (int rank = 0; rank < 4; ++rank) EXPECT_EQ(wrong[rank], 0) << "mode " << static_cast<int>(mode);
  }
}

TEST(HostBatchProgram, BatchOfOneIsThePlan) {
  Mesh mesh({2, 2});
  Plan plan = make_plan(Layout(mesh, {Placement::shard(0), Placement::shard(1)}, Dims{8, 8}),
                        Layout(mesh, {Placement::replicate(), Placement::shard(0)}, Dims{8, 8}), DType::kBF16);
  const RankProgram a = lower(plan, 3), b = lower(PlanBatch::of(plan), 3);
  EXPECT_EQ(a.ops.size(), b.ops.size());
  EXPECT_EQ(a.work_elements, b.work_elements);
  EXPECT_TRUE(b.tensor_input_bytes.empty());
}

TEST(HostBatchProgram, ExecutorTakesOneBufferPerTensor) {
  Mesh mesh({2});
  std::vector<BatchEntry> entries{
      {Layout(mesh, {Placement::shard(0)}, Dims{4, 4}), Layout(mesh, {Placement::replicate()}, Dims{4, 4}),
       DType::kI64},
      {Layout(mesh, {Placement::replicate()}, Dims{3}), Layout(mesh, {Placement::shard(0)}, Dims{3}), DType::kU8}};
  PlanBatch batch = make_plan_batch(entries);
  HostWorld world(2);
  std::vector<std::string> errors(2);
  run_ranks(
      2,
      [&](int rank) {
        HostCommunicator comm(world, rank);
        HostDevice device;
        Executor exec(batch, comm, device);
        ASSERT_EQ(exec.tensors(), 2u);
        std::vector<std::byte> in0(exec.input_bytes(0)), out0(exec.output_bytes(0)), in1(exec.input_bytes(1)),
            out1(exec.output_bytes(1));
        ConstBuffer ins[] = {{in0.data(), in0.size()}, {in1.data(), in1.size()}};
        MutableBuffer outs[] = {{out0.data(), out0.size()}, {out1.data(), out1.size()}};
        try {
          exec.run(std::span<const ConstBuffer>(ins, 1), outs, nullptr);
        } catch (const Error& e) {
          errors[rank] = e.what();
        }
        fill_local(in0.data(), batch.plan(0).src(), rank, DType::kI64);
        fill_local(in1.data(), batch.plan(1).src(), rank, DType::kU8);
        exec.run(ins, outs, nullptr);
        exec.wait(nullptr);
        EXPECT_EQ(count_local_mismatches(out0.data(), batch.plan(0).src(), batch.plan(0).dst(), rank, DType::kI64), 0);
        EXPECT_EQ(count_local_mismatches(out1.data(), batch.plan(1).src(), batch.plan(1).dst(), rank, DType::kU8), 0);
      },
      &world);
  for (const std::string& e : errors) EXPECT_NE(e.find("1 inputs and 2 outputs for 2 tensors"), std::string::npos) << e;
}

TEST(HostBatchProgram, BadBatches) {
  EXPECT_THROW(PlanBatch(std::vector<std::shared_ptr<const Plan>>{}), Error);
  PlanOptions nccl;
  nccl.transport = Transport::kNccl;
  Plan a = make_plan(Layout(Mesh({2}), {Placement::shard(0)}, Dims{4}),
                     Layout(Mesh({2}), {Placement::replicate()}, Dims{4}), DType::kF32, nccl);
  Plan b = make_plan(Layout(Mesh({4}), {Placement::shard(0)}, Dims{4}),
                     Layout(Mesh({4}), {Placement::replicate()}, Dims{4}), DType::kF32, nccl);
  try {
    PlanBatch({std::make_shared<const Plan>(a), std::make_shared<const Plan>(b)});
    FAIL() << "two meshes accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("tensor 1"), std::string::npos) << e.what();
  }
  PlanOptions nvlink;
  nvlink.transport = Transport::kNvlink;
  nvlink.strategy = Strategy::kP2P;
  nvlink.topology.peer_access = true;
  Plan c = make_plan(Layout(Mesh({2}), {Placement::shard(0)}, Dims{4}),
                     Layout(Mesh({2}), {Placement::replicate()}, Dims{4}), DType::kF32, nvlink);
  EXPECT_NO_THROW(PlanBatch({std::make_shared<const Plan>(c)}));
  EXPECT_NO_THROW(PlanBatch({std::make_shared<const Plan>(a), std::make_shared<const Plan>(c)}));
}

// Rank-scoped plans (as reshard.torch makes them) of one-sided members whose workspaces differ in size between ranks
// (uneven shards, staged first steps, two-step plans): a peer's workspace is addressed through its own part for the
// tensor, wherever its workspace lays it out. Every rank runs three times on new buffers; every element checked.
// Runs rank-scoped plans of `entries` (planned with `o`) three times on every rank of `mesh` (host backend), new
// buffers each time; returns the wrong elements and counts the checked ones into `checked`.
Index run_rank_plans(const Mesh& mesh, const std::vector<BatchEntry>& entries, const PlanOptions& o,
                     std::atomic<Index>& checked, bool expect_staged) {
  const int n = static_cast<int>(mesh.size());
  HostWorld world(n);
  std::atomic<Index> wrong{0};
  run_ranks(
      n,
      [&](int r) {
        const PlanBatch batch = make_plan_batch(entries, o, r);
        int staged = 0;
        for (const auto& p : batch.plans()) staged += !p->steps().empty() && p->steps().front().staged;
        if (expect_staged) {
          EXPECT_GT(staged, 0) << "no staged member on rank " << r;
        }
        HostCommunicator comm(world, r);
        HostDevice device;
        ExecutorOptions eo;
        eo.buffers_change = BuffersChange::kAnyRank;
        Executor exec(batch, comm, device, eo);
        for (int run = 0; run < 3; ++run) {
          std::vector<std::vector<std::byte>> ins, outs;
          std::vector<ConstBuffer> in;
          std::vector<MutableBuffer> out;
          for (size_t t = 0; t < entries.size(); ++t) {
            ins.emplace_back(exec.input_bytes(t));
            outs.emplace_back(exec.output_bytes(t), std::byte{0xA5});
            fill_local(ins.back().data(), batch.plan(t).src(), r, entries[t].dtype);
          }
          for (size_t t = 0; t < entries.size(); ++t) {
            in.push_back({ins[t].data(), ins[t].size()});
            out.push_back({outs[t].data(), outs[t].size()});
          }
          exec.run(in, out, nullptr);
          exec.wait(nullptr);
          for (size_t t = 0; t < entries.size(); ++t) {
            const Plan& plan = batch.plan(t);
            wrong += count_local_mismatches(outs[t].data(), plan.src(), plan.dst(), r, entries[t].dtype);
            checked += volume(plan.dst().box(r));
          }
        }
      },
      &world);
  return wrong.load();
}

TEST(HostBatchProgram, RankPlansOfOneSidedMembersEveryElement) {
  // Forward and backward pairs of a mixed list (as reshard.torch's redistribute_many moves them and their gradients).
  const char* pairs[][2] = {{"S0", "S1"}, {"S1", "R"}, {"R", "S0"},  {"S0", "R"}, {"P", "S1"}, {"S1", "S0"},
                            {"P", "R"},   {"R", "S1"}, {"S1", "S1"}, {"S1", "R"}, {"R", "R"},  {"S0", "S0"}};
  for (const Mesh& mesh : {Mesh({3}), Mesh({4}), Mesh({2, 2})}) {
    std::vector<BatchEntry> entries;
    for (int i = 0; i < 24; ++i) {
      const Dims shape{7 + i, 5 + 2 * i};
      std::vector<Placement> from(mesh.ndim(), Placement::replicate()), to = from;
      from.back() = parse_placements(pairs[i % 12][0]).front();
      to.back() = parse_placements(pairs[i % 12][1]).front();
      entries.push_back({Layout(mesh, from, shape), Layout(mesh, to, shape), i % 2 ? DType::kF32 : DType::kBF16});
    }
    for (Transport transport : {Transport::kNvlink, Transport::kAuto}) {
      PlanOptions o;
      o.transport = transport;
      o.topology.peer_access = true;
      o.topology.ranks_per_node = 4;
      o.buffers_change = true;
      std::atomic<Index> checked{0};
      EXPECT_EQ(run_rank_plans(mesh, entries, o, checked, transport == Transport::kNvlink), 0)
          << mesh.str() << " " << to_string(transport);
      EXPECT_GT(checked.load(), 0);
    }
  }
}

TEST(HostBatchProgram, CacheKeysTheWholeList) {
  Mesh mesh({2});
  std::vector<BatchEntry> entries{
      {Layout(mesh, {Placement::shard(0)}, Dims{4, 4}), Layout(mesh, {Placement::replicate()}, Dims{4, 4}),
       DType::kF32},
      {Layout(mesh, {Placement::shard(1)}, Dims{4, 6}), Layout(mesh, {Placement::shard(0)}, Dims{4, 6}), DType::kBF16}};
  PlanCache cache;
  auto first = cache.get_or_plan_batch(entries);
  auto again = cache.get_or_plan_batch(entries);
  EXPECT_EQ(first.get(), again.get());
  entries[1].dtype = DType::kF32;
  auto other = cache.get_or_plan_batch(entries);
  EXPECT_NE(first.get(), other.get());
  EXPECT_EQ(other->size(), 2u);
  EXPECT_EQ(cache.stats().hits, 1u);
}

TEST(HostBatchProgram, JsonRoundTrips) {
  Mesh mesh({2, 2});
  std::vector<BatchEntry> entries{
      {Layout(mesh, parse_placements("S0,S1"), Dims{8, 6}), Layout(mesh, parse_placements("R,S0"), Dims{8, 6}),
       DType::kBF16},
      {Layout(mesh, parse_placements("P,R"), Dims{5}), Layout(mesh, parse_placements("S0,R"), Dims{5}), DType::kI64}};
  PlanBatch batch = make_plan_batch(entries);
  const std::string text = batch_to_json(batch);
  PlanBatch back = batch_from_json(text);
  EXPECT_EQ(batch_to_json(back), text);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(plan_to_json(back.plan(1)), plan_to_json(batch.plan(1)));
  EXPECT_EQ(run_batch(back, testing::quick_host_run()).wrong_elements, 0);
  for (const std::string& bad : {std::string("[]"), std::string("{\"schema\": \"reshard.batch/1\", \"plans\": []}"),
                                 std::string("{\"schema\": \"reshard.plan/1\", \"plans\": [1]}"),
                                 std::string("{\"schema\": \"reshard.batch/1\", \"plans\": [{}]}")}) {
    try {
      batch_from_json(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_TRUE(e.kind() == ErrorKind::kParse || e.kind() == ErrorKind::kInvalidArgument) << e.what();
    }
  }
}

}  // namespace
}  // namespace reshard
