// Test tiers. The exhaustive suites enumerate thousands of layout pairs; CI runs them twice (release, and under
// ASan + UBSan, 3-5x slower) on 2 cores. RESHARD_TEST_TIER=full runs every case (the GPU device scripts and long
// local runs set it); the default fast tier runs every case of the small enumerations and an evenly spread sample
// of the large ones: every mesh, shape, placement and strategy still runs, only fewer of their combinations.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <string_view>

namespace reshard::testing {

inline bool tier_is(std::string_view name) {
  const char* tier = std::getenv("RESHARD_TEST_TIER");
  return tier != nullptr && std::string_view(tier) == name;
}

// True when RESHARD_TEST_TIER is "full".
inline bool full_tier() { return tier_is("full"); }

// The sanitizer tier (RESHARD_TEST_TIER=sanitizer, CI's ASan + UBSan run, whose code is 3-5x slower): the fast tier's
// samples cut to a quarter, and a quarter of the enumerations the fast tier runs whole (sanitizer_stride). The release
// run checks the fast tier's cases; the sanitizer run looks for memory and undefined behaviour on every code path,
// which a quarter of the cases still takes.
inline bool sanitizer_tier() { return tier_is("sanitizer"); }

// The smallest stride >= `at_least` coprime with `inner` (consecutive rows of a sample land on different inner values).
inline long long coprime_stride(long long at_least, long long inner) {
  long long stride = at_least;
  while (std::gcd(stride, inner) != 1) ++stride;
  return stride;
}

// The fast tier's stride through an enumeration of `total` cases whose innermost loop has `inner` values: the
// smallest stride coprime with `inner` that runs at most `cap` cases (a quarter of it in the sanitizer tier). 1
// (every case) in the full tier or when `total` is within the cap.
inline long long tier_stride(long long total, long long cap, long long inner) {
  if (sanitizer_tier()) cap = std::max(1LL, cap / 4);
  if (full_tier() || total <= cap) return 1;
  return coprime_stride((total + cap - 1) / cap, inner);
}

// The stride through an enumeration the fast tier runs whole: 1, or in the sanitizer tier about every fourth case.
inline long long sanitizer_stride(long long inner) { return sanitizer_tier() ? coprime_stride(4, inner) : 1; }

// Whether case number `index` of an enumeration sampled with `stride` runs.
inline bool in_tier(long long index, long long stride) { return index % stride == 0; }

}  // namespace reshard::testing
