// The harness's building blocks: bounded iteration samples, the memory a run needs, the run record's three
// renderings, byte counts and escaping.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "reshard/memory_check.hpp"
#include "reshard/planner.hpp"
#include "reshard/run_record.hpp"
#include "reshard/sweep_estimate.hpp"
#include "reshard/text.hpp"
#include "reshard/tools_text.hpp"

namespace reshard {
namespace {

TEST(IterationSamples, ExactUpToCapacityThenBounded) {
  IterationSamples s(8);
  for (int i = 1; i <= 5; ++i) s.add(i);
  TimingSummary t = summarize(s);
  EXPECT_EQ(t.iterations, 5);
  EXPECT_EQ(t.samples, 5);
  EXPECT_EQ(t.min_us, 1);
  EXPECT_EQ(t.median_us, 3);
  EXPECT_EQ(t.max_us, 5);
  EXPECT_EQ(t.mean_us, 3);
  for (int i = 6; i <= 100000; ++i) s.add(i);
  EXPECT_EQ(s.count(), 100000);
  EXPECT_EQ(s.values().size(), 8u);  // memory does not grow with the iterations
  for (double v : s.values()) EXPECT_TRUE(v >= 1 && v <= 100000);
}

TEST(IterationSamples, UniformSampleEstimatesTheMedian) {
  IterationSamples s;                                 // 4096 kept
  for (int i = 0; i < 1000000; ++i) s.add(i % 1000);  // uniform on 0..999, median 499.5
  TimingSummary t = summarize(s);
  EXPECT_EQ(t.iterations, 1000000);
  EXPECT_EQ(t.samples, 4096);
  EXPECT_NEAR(t.median_us, 499.5, 40);
  EXPECT_NEAR(t.p90_us, 899, 40);
}

TEST(IterationSamples, RanksKeepTheSameIterationsSoTheSlowestCombines) {
  // Rank 0 is slow on even iterations, rank 1 on odd ones: the slowest rank per iteration is always 10.
  IterationSamples a(16), b(16);
  for (int i = 0; i < 10000; ++i) {
    a.add(i % 2 == 0 ? 10 : 1);
    b.add(i % 2 == 1 ? 10 : 1);
  }
  a.max_with(b);
  for (double v : a.values()) EXPECT_EQ(v, 10);
  IterationSamples c(16);
  c.add(1);
  EXPECT_THROW(a.max_with(c), Error);
}

TEST(MemoryNeed, HostRunCountsEveryRanksTensorsWorkspaceAndMessages) {
  // 2 ranks, 1024x1024 f32, S0 -> S1 by p2p: each rank holds 2 MiB in and out, sends 1 MiB.
  Layout src(Mesh({2}), parse_placements("S0"), Dims{1024, 1024});
  PlanOptions o;
  o.strategy = Strategy::kP2P;
  Plan plan = make_plan(src, src.with_placements(parse_placements("S1")), DType::kF32, o);
  MemoryNeed host = memory_need(plan, Backend::kHost);
  const Index mib = 1 << 20;
  EXPECT_EQ(host.host_bytes, 2 * 2 * mib + 2 * 2 * mib + 2 * plan.peak_workspace_bytes() + 2 * mib);
  EXPECT_NE(host.host_detail.find("sources 4.0 MiB + targets 4.0 MiB"), std::string::npos) << host.host_detail;
  MemoryNeed gpu = memory_need(plan, Backend::kNccl, 1);
  EXPECT_EQ(gpu.host_bytes, 0);
  EXPECT_EQ(gpu.device_bytes, 2 * mib + 2 * mib + plan.peak_workspace_bytes());
  // Changing buffers (RunOptions::buffers): every set's source and target, one workspace.
  MemoryNeed sets = memory_need(plan, Backend::kNccl, 1, 27);
  EXPECT_EQ(sets.device_bytes, 27 * (2 * mib + 2 * mib) + plan.peak_workspace_bytes());
}

TEST(MemoryNeed, AllGatherStagesTheGroupsData) {
  // all_gather on 4 ranks: each posts its 1 MiB shard to 3 others.
  Layout src(Mesh({4}), parse_placements("S0"), Dims{1024, 1024});
  PlanOptions o;
  o.strategy = Strategy::kCollective;
  Plan plan = make_plan(src, src.with_placements(parse_placements("R")), DType::kF32, o);
  ASSERT_EQ(plan.steps().front().kind, StepKind::kAllGather);
  MemoryNeed need = memory_need(plan, Backend::kHost);
  const Index mib = 1 << 20;
  EXPECT_EQ(need.host_bytes, 4 * mib + 4 * 4 * mib + 4 * plan.peak_workspace_bytes() + 4 * 3 * mib);
}

TEST(RunRecord, HostRowsShowDashWhereAFigureDoesNotApply) {
  RunRecord r;
  r.mesh = "2";
  r.from = "S0";
  r.to = "P(avg),S1";
  r.shape = "8x8";
  r.dtype = "f32";
  r.strategy = "p2p";
  r.backend = "host";
  r.tensor_bytes = 256;
  r.max_rank_bytes = 128;
  r.timing.median_us = 2;
  r.timing.iterations = 3;
  const std::string row = record_table_row(r);
  EXPECT_EQ(std::count(row.begin(), row.end(), '-'), 3) << row;  // graph, bound, %bound
  EXPECT_NE(row.find("0.13"), std::string::npos) << row;         // algbw = 256 B / 2 us
  const std::string csv = record_csv_row(r), header = record_csv_header();
  EXPECT_EQ(std::count(csv.begin(), csv.end(), ','), std::count(header.begin(), header.end(), ',') + 1)
      << csv;                                           // one comma inside the quoted "P(avg),S1"
  EXPECT_NE(csv.find(",,"), std::string::npos) << csv;  // empty fields
  nlohmann::json j = nlohmann::json::parse(record_json(r));
  EXPECT_TRUE(j["graph_us"].is_null());
  EXPECT_TRUE(j["bound_us"].is_null());
  EXPECT_DOUBLE_EQ(j["algbw_GBps"].get<double>(), 0.128);
  r.timing.median_us = 0;  // no time, no bandwidth: never inf or nan
  j = nlohmann::json::parse(record_json(r));
  EXPECT_TRUE(j["algbw_GBps"].is_null());
  r.bound_us = 1;
  r.timing.median_us = 4;
  EXPECT_NE(record_table_row(r).find("25.0%"), std::string::npos);
}

TEST(RunRecord, RowsInPlaceHaveNoBandwidthAndHostRowsNameTheEmulatedTransport) {
  const Layout src(Mesh({2}), parse_placements("S0"), Dims{64, 64});
  RunResult result;
  result.backend = Backend::kHost;
  result.timing.median_us = 0.03;  // the loop's own time: nothing ran
  RunRecord same = make_record(make_plan(src, src, DType::kF32), result, TrafficBound{});
  EXPECT_TRUE(same.in_place);
  EXPECT_FALSE(same.algbw_GBps());
  EXPECT_FALSE(same.busbw_GBps());
  nlohmann::json j = nlohmann::json::parse(record_json(same));
  EXPECT_TRUE(j["algbw_GBps"].is_null());
  EXPECT_TRUE(j["busbw_GBps"].is_null());

  PlanOptions nvlink;
  nvlink.strategy = Strategy::kP2P;
  nvlink.transport = Transport::kNvlink;
  const Plan moved = make_plan(src, src.with_placements(parse_placements("S1")), DType::kF32, nvlink);
  RunRecord host = make_record(moved, result, TrafficBound{});
  EXPECT_FALSE(host.in_place);
  EXPECT_EQ(host.label(), "p2p/nvlink-emulated");
  EXPECT_NE(record_table_row(host).find(" p2p/nvlink-emulated "), std::string::npos) << record_table_row(host);
  EXPECT_EQ(record_table_note(host), host_emulation_note());
  EXPECT_EQ(nlohmann::json::parse(record_json(host))["transport"], "nvlink");  // the plan's transport; backend: host
  result.backend = Backend::kNccl;
  RunRecord gpu = make_record(moved, result, TrafficBound{});
  EXPECT_EQ(gpu.label(), "p2p/nvlink");
  EXPECT_EQ(record_table_note(gpu), "");
}

TEST(SweepEstimate, ALineThroughTwoTimedRunsNeverNegative) {
  RunCost c = fit_run_cost(1000, 0.01, 5000, 0.05);  // 10 us per byte, no fixed part
  EXPECT_NEAR(c.fixed_s, 0, 1e-12);
  EXPECT_NEAR(c.seconds(10000), 0.1, 1e-9);
  c = fit_run_cost(5000, 0.03, 1000, 0.01);  // either order
  EXPECT_NEAR(c.fixed_s, 0.005, 1e-9);
  EXPECT_NEAR(c.per_byte_s, 5e-6, 1e-12);
  c = fit_run_cost(1000, 0.02, 5000, 0.01);  // the larger run was faster: flat at the slower one
  EXPECT_EQ(c.per_byte_s, 0);
  EXPECT_EQ(c.seconds(1 << 30), 0.02);
  c = fit_run_cost(1000, 0.001, 2000, 0.1);  // a steep line through the origin instead of a negative fixed part
  EXPECT_GE(c.fixed_s, 0);
  EXPECT_NEAR(c.seconds(2000), 0.1, 1e-9);
  c = fit_run_cost(4096, 0.02, 4096, 0.04);  // one probe size: the mean
  EXPECT_NEAR(c.seconds(123), 0.03, 1e-12);
}

TEST(SweepEstimate, TheBudgetKeepsTheSmallestSizesThatFitAndProbesSkipIdentities) {
  SweepOptions o = resolve_sweep([] {
    SweepOptions in;
    in.backend = Backend::kHost;
    in.meshes = {{2}};
    in.placements = {"S0", "S1"};
    in.dtypes = {DType::kF32};
    in.strategies = {Strategy::kP2P};
    in.transports = {Transport::kNccl};
    return in;
  }());
  ASSERT_TRUE(o.time_budget_s);  // the host backend's default sizes: 16 KiB to 64 MiB, cut to a minute
  EXPECT_EQ(*o.time_budget_s, 60);
  EXPECT_EQ(o.sizes_bytes.front(), 16 << 10);
  EXPECT_EQ(o.sizes_bytes.back(), 64 << 20);
  const std::vector<SweepCase> cases = sweep_cases(o);
  ASSERT_EQ(cases.size(), 4 * o.sizes_bytes.size());  // 4 placement pairs per size, one run each
  const std::vector<size_t> probes = probe_cases(cases, probe_bytes(Backend::kHost));
  ASSERT_EQ(probes.size(), 2u);
  EXPECT_NE(cases[probes[0]].from, cases[probes[0]].to);  // S0 -> S0 moves nothing: not a probe
  EXPECT_EQ(case_bytes(cases[probes[0]]), 16 << 10);
  EXPECT_EQ(case_bytes(cases[probes[1]]), 4 << 20);
  const RunCost cost{0.01, 1e-9};  // 10 ms and 1 s per GB
  // Per size, 4 runs: 16 KiB 0.04 s, ..., 16 MiB 0.107 s, 64 MiB 0.308 s.
  const double bytes = (16 << 10) + (64 << 10) + (256 << 10) + (1 << 20) + (4 << 20) + (16 << 20) + (64 << 20);
  EXPECT_NEAR(estimate_sweep_seconds(cases, o, cost), 4 * (7 * 0.01 + 1e-9 * bytes), 1e-9);
  std::vector<SweepCase> kept = fit_to_budget(cases, o, cost, 0.3);
  EXPECT_EQ(kept.size(), 4 * 5u);  // up to 4 MiB: 0.22 s; with 16 MiB 0.33 s, over the budget
  for (const SweepCase& c : kept) EXPECT_LE(case_bytes(c), 4 << 20);
  kept = fit_to_budget(cases, o, cost, 0.001);
  EXPECT_EQ(kept.size(), 4u);  // the smallest size always
  EXPECT_EQ(fit_to_budget(cases, o, cost, 1e9).size(), cases.size());
}

TEST(ToolsText, ByteCountsAndEscaping) {
  using tools::ByteCountError;
  ByteCountError e{};
  EXPECT_EQ(tools::parse_byte_count("64MiB", &e), Index(64) << 20);
  EXPECT_EQ(tools::parse_byte_count("8B"), 8);
  EXPECT_FALSE(tools::parse_byte_count("", &e));
  EXPECT_EQ(e, ByteCountError::kEmpty);
  EXPECT_FALSE(tools::parse_byte_count("-1", &e));
  EXPECT_EQ(e, ByteCountError::kNegative);
  EXPECT_FALSE(tools::parse_byte_count("9999999999GiB", &e));
  EXPECT_EQ(e, ByteCountError::kTooLarge);
  EXPECT_FALSE(tools::parse_byte_count("12QB", &e));
  EXPECT_EQ(e, ByteCountError::kNotANumber);
  EXPECT_EQ(printable("a\x1b[31mb\n\x7f\x01"), "a\\e[31mb\\n\\x7f\\x01");
}

TEST(MemoryLimit, InjectedLimitCapsTheAvailableFigure) {
  ::setenv("RESHARD_MEMORY_LIMIT_BYTES", "4KiB", 1);
  EXPECT_EQ(available_host_memory(), 4096);
  MemoryNeed need;
  need.host_bytes = 4097;
  need.host_detail = "test";
  EXPECT_THROW(check_memory(need, Backend::kHost, {}), Error);
  need.host_bytes = 4096;
  EXPECT_NO_THROW(check_memory(need, Backend::kHost, {}));
  ::setenv("RESHARD_MEMORY_LIMIT_BYTES", "lots", 1);
  EXPECT_THROW(available_host_memory(), Error);
  ::unsetenv("RESHARD_MEMORY_LIMIT_BYTES");
  EXPECT_GT(available_host_memory(), 0);
}

}  // namespace
}  // namespace reshard
