// The Partial test pattern catches an executor that skips a reduction or drops one rank's contribution, for every
// reduce op and dtype (reshard/pattern.hpp): verified "correct" must mean every contribution was reduced.
#include <gtest/gtest.h>

#include <vector>

#include "reshard/host_backend.hpp"
#include "reshard/host_reduce.hpp"
#include "reshard/pattern.hpp"

namespace reshard {
namespace {

constexpr DType kDtypes[] = {DType::kF64, DType::kF32, DType::kF16, DType::kBF16,
                             DType::kI64, DType::kI32, DType::kI8,  DType::kU8};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin};

using Bytes = std::vector<unsigned char>;

// Every rank's contribution (its whole local tensor: the source is Partial on every mesh dim, so every box is whole).
std::vector<Bytes> contributions(const Layout& src, DType dtype) {
  std::vector<Bytes> c(src.mesh().size(), Bytes(static_cast<size_t>(src.global_volume() * element_size(dtype))));
  for (int r = 0; r < src.mesh().size(); ++r) fill_local(c[r].data(), src, r, dtype);
  return c;
}

// What an all-reduce over the ranks in `use` gives (in rank order, the host backend's arithmetic), divided by the
// number of ranks for avg whatever `use` holds, as an executor that lost contributions would.
Bytes reduce(const std::vector<Bytes>& c, const std::vector<int>& use, const Layout& src, DType dtype, ReduceOp op) {
  Bytes out = c[use.front()];
  const size_t n = static_cast<size_t>(src.global_volume());
  for (size_t j = 1; j < use.size(); ++j) host_reduce(out.data(), c[use[j]].data(), n, dtype, op);
  if (op == ReduceOp::kAvg) {  // one source, divided by the rank count
    const void* self[] = {out.data()};
    host_reduce(out.data(), std::span<const void* const>(self), n, dtype, ReduceOp::kSum, src.mesh().size());
  }
  return out;
}

void check_every_contribution_counts(const Mesh& mesh, const std::vector<Placement>& partial) {
  for (ReduceOp op : kOps) {
    std::vector<Placement> from = partial;
    for (Placement& p : from) p = Placement::partial(op);
    const Layout src(mesh, from, Dims{5, 7});
    const Layout dst = src.with_placements(std::vector<Placement>(mesh.ndim(), Placement::replicate()));
    const int q = mesh.size();
    std::vector<int> all(q);
    for (int r = 0; r < q; ++r) all[r] = r;
    for (DType dtype : kDtypes) {
      SCOPED_TRACE(std::string(to_string(op)) + " " + std::string(to_string(dtype)) + " on " + mesh.str());
      const std::vector<Bytes> c = contributions(src, dtype);
      // The true reduction verifies on every rank.
      const Bytes right = reduce(c, all, src, dtype, op);
      for (int r = 0; r < q; ++r) EXPECT_EQ(count_local_mismatches(right.data(), src, dst, r, dtype), 0);
      for (int r = 0; r < q; ++r) {
        // A rank that skipped the reduction (kept its own contribution, or divided it for avg) is caught.
        EXPECT_GT(count_local_mismatches(c[r].data(), src, dst, r, dtype), 0) << "skipped reduction, rank " << r;
        if (op == ReduceOp::kAvg) {
          EXPECT_GT(count_local_mismatches(reduce(c, {r}, src, dtype, op).data(), src, dst, r, dtype), 0)
              << "skipped reduction (divided), rank " << r;
        }
        // So is a reduction that lost rank r's contribution.
        std::vector<int> others;
        for (int j = 0; j < q; ++j)
          if (j != r) others.push_back(j);
        EXPECT_GT(count_local_mismatches(reduce(c, others, src, dtype, op).data(), src, dst, 0, dtype), 0)
            << "lost the contribution of rank " << r;
      }
    }
  }
}

TEST(PatternStrength, ASkippedOrIncompleteReductionIsDetected) {
  check_every_contribution_counts(Mesh({2}), {Placement::partial()});
  check_every_contribution_counts(Mesh({4}), {Placement::partial()});
  check_every_contribution_counts(Mesh({2, 2}), {Placement::partial(), Placement::partial()});
}

}  // namespace
}  // namespace reshard
