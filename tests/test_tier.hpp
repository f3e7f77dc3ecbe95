// Test tiers. The exhaustive suites enumerate thousands of layout pairs; CI runs them twice (release, and under
// ASan + UBSan, 3-5x slower) on 2 cores. RESHARD_TEST_TIER=full runs every case (the GPU device scripts and long
// local runs set it); the default fast tier runs every case of the small enumerations and an evenly spread sample
// of the large ones: every mesh, shape, placement and strategy still runs, only fewer of their combinations.
#pragma once

#include <cstdlib>
#include <numeric>
#include <string_view>

namespace reshard::testing {

// True when RESHARD_TEST_TIER is "full".
inline bool full_tier() {
  const char* tier = std::getenv("RESHARD_TEST_TIER");
  return tier != nullptr && std::string_view(tier) == "full";
}

// The fast tier's stride through an enumeration of `total` cases whose innermost loop has `inner` values: the
// smallest stride that runs at most `cap` cases and is coprime with `inner` (so consecutive rows of the sample land
// on different inner values). 1 (every case) in the full tier or when `total` <= `cap`.
inline long long tier_stride(long long total, long long cap, long long inner) {
  if (full_tier() || total <= cap) return 1;
  long long stride = (total + cap - 1) / cap;
  while (std::gcd(stride, inner) != 1) ++stride;
  return stride;
}

// Whether case number `index` of an enumeration sampled with `stride` runs.
inline bool in_tier(long long index, long long stride) { return index % stride == 0; }

}  // namespace reshard::testing
