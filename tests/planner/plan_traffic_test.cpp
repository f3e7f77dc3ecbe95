// The plan table's and picture's traffic figures: per-rank totals (computed per group or in closed form) agree with
// the rank x rank figures summed cell by cell, and the exchange steps agree with the lowered programs' messages.
#include <gtest/gtest.h>

#include "report/plan_traffic.hpp"
#include "reshard/planner.hpp"
#include "reshard/program.hpp"
#include "test_plans.hpp"

namespace reshard {
namespace {

std::vector<Plan> plans() {
  std::vector<Plan> out;
  const testing::LayoutCase cases[] = {
      {{2, 3}, "S0,S1", "S1,S0", {12, 18}},        {{2, 3}, "S0,R", "R,S1", {7, 11}},
      {{2, 2, 2}, "S0,S1,S0", "S1,S0,R", {16, 8}}, {{4}, "S0", "R", {10, 3}},
      {{2, 3}, "P,S0", "S1,R", {6, 12}},           {{2, 2}, "P(max),P(max)", "R,S0", {8, 8}},
      {{3, 2}, "S1,S0", "S0,S0", {9, 10}}};
  for (const testing::LayoutCase& c : cases) {
    const Layout src = c.src(), dst = c.dst();
    for (Strategy s : {Strategy::kCollective, Strategy::kP2P, Strategy::kHybrid})
      for (Transport t : {Transport::kNccl, Transport::kNvlink}) {
        if (s == Strategy::kCollective && t == Transport::kNvlink) continue;
        PlanOptions o;
        o.strategy = s;
        o.transport = t;
        try {
          out.push_back(make_plan(src, dst, DType::kF32, o));
        } catch (const Error&) {  // hybrid has no plan on some pairs
        }
      }
  }
  return out;
}

TEST(PlanTraffic, PerRankTotalsEqualTheMatrixSums) {
  int collective_steps = 0;
  for (const Plan& plan : plans()) {
    const int n = plan.src().mesh().size();
    std::vector<double> out(n, 0), in(n, 0);
    for (size_t i = 0; i < plan.steps().size(); ++i) {
      detail::BlockTraffic t = detail::block_traffic(plan, i, 1);
      ASSERT_EQ(t.cells, n);
      if (plan.steps()[i].kind == StepKind::kLocal) continue;
      collective_steps += plan.steps()[i].kind != StepKind::kP2P;
      for (int a = 0; a < n; ++a)
        for (int b = 0; b < n; ++b)
          if (a != b) {
            out[a] += t.bytes[static_cast<size_t>(a) * n + b];
            in[b] += t.bytes[static_cast<size_t>(a) * n + b];
          }
    }
    detail::RankTotals totals = detail::rank_traffic(plan);
    for (int r = 0; r < n; ++r) {
      EXPECT_DOUBLE_EQ(totals.out[r], out[r]) << plan.src().str() << " -> " << to_string(plan.dst().placements()) << " "
                                              << to_string(plan.strategy()) << " rank " << r;
      EXPECT_DOUBLE_EQ(totals.in[r], in[r]) << plan.src().str() << " " << to_string(plan.strategy()) << " rank " << r;
    }
  }
  EXPECT_GT(collective_steps, 5);  // the cases exercise the collectives, not only p2p
}

TEST(PlanTraffic, ExchangeStepsMatchTheLoweredMessages) {
  for (const Plan& plan : plans()) {
    const int n = plan.src().mesh().size(), es = plan.element_size();
    for (size_t i = 0; i < plan.steps().size(); ++i) {
      const StepKind kind = plan.steps()[i].kind;
      if (kind != StepKind::kP2P && kind != StepKind::kAllToAll) continue;
      detail::BlockTraffic t = detail::block_traffic(plan, i, 1);
      std::vector<RankProgram> programs;
      for (int r = 0; r < n; ++r) programs.push_back(lower(plan, r));
      for (int r = 0; r < n; ++r) {
        // Two-sided: r's sends; one-sided (nvlink): what the others pull from r's buffers.
        std::vector<double> sent(n, 0);
        for (const Op& op : programs[r].ops)
          if (const auto* x = std::get_if<Exchange>(&op.body); x && op.step == static_cast<int>(i))
            for (const PeerTransfer& s : x->sends) sent[s.peer] += static_cast<double>(s.elements) * es;
        for (int q = 0; q < n; ++q)
          for (const Op& op : programs[q].ops) {
            if (op.step != static_cast<int>(i)) continue;
            const std::vector<CopyRegion>* regions = nullptr;
            if (const auto* c = std::get_if<Copies>(&op.body)) regions = &c->regions;
            if (const auto* f = std::get_if<FusedPeerStep>(&op.body)) regions = &f->regions;
            if (regions)
              for (const CopyRegion& cr : *regions)
                if (cr.src.peer == r) sent[q] += static_cast<double>(cr.shape.product()) * es;
            const std::vector<ReduceRegion>* reduced = nullptr;  // Partial sources: reduced as they are read
            if (const auto* red = std::get_if<Reductions>(&op.body)) reduced = &red->regions;
            if (const auto* f = std::get_if<FusedPeerStep>(&op.body)) reduced = &f->reduce;
            if (reduced)
              for (const ReduceRegion& rr : *reduced)
                for (const BufferRef& b : rr.srcs)
                  if (b.peer == r) sent[q] += static_cast<double>(rr.shape.product()) * es;
          }
        int peers = 0;
        for (int q = 0; q < n; ++q) {
          if (q == r) continue;
          EXPECT_DOUBLE_EQ(t.bytes[static_cast<size_t>(r) * n + q], sent[q])
              << plan.src().str() << " step " << i << " " << r << " -> " << q;
          peers += sent[q] > 0;
        }
        EXPECT_EQ(t.peers_out[r], peers) << plan.src().str() << " step " << i << " rank " << r;
      }
    }
  }
}

TEST(PlanTraffic, BlocksSumTheirRanks) {
  for (const Plan& plan : plans()) {
    const int n = plan.src().mesh().size();
    for (size_t i = 0; i < plan.steps().size(); ++i) {
      detail::BlockTraffic one = detail::block_traffic(plan, i, 1), two = detail::block_traffic(plan, i, 2);
      ASSERT_EQ(two.cells, (n + 1) / 2);
      for (int a = 0; a < two.cells; ++a)
        for (int b = 0; b < two.cells; ++b) {
          double sum = 0;
          for (int x = 2 * a; x < std::min(n, 2 * a + 2); ++x)
            for (int y = 2 * b; y < std::min(n, 2 * b + 2); ++y) sum += one.bytes[static_cast<size_t>(x) * n + y];
          EXPECT_NEAR(two.bytes[static_cast<size_t>(a) * two.cells + b], sum, 1e-6 * std::max(1.0, sum));
        }
    }
  }
}

}  // namespace
}  // namespace reshard
