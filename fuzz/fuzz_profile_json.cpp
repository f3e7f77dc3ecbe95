// Fuzzes the profile loader: anything it accepts round-trips exactly and prices every operation, up to the largest
// byte count, with a finite time >= 0. Seeds include unknown members nested past the depth limit (refused before they
// are copied) and figures that would overflow estimates (refused by range).
#include <cmath>

#include "fuzz_common.hpp"
#include "reshard/profile.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace reshard;
  std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::only_reshard_errors([&] {
    const Profile p = fuzz::round_trip(text, profile_from_json, profile_to_json);
    for (const LinkProfile* l : {&p.intra_node, &p.inter_node})
      for (const AlphaBeta* ab : std::initializer_list<const AlphaBeta*>{&l->p2p, &l->all_gather, &l->reduce_scatter,
                                                                         &l->all_reduce, &l->all_to_all, &p.copy})
        for (double bytes : {0.0, 1.0, 4096.0, 1e9, 9.2e18}) {
          double t = ab->time_us(bytes);
          if (!(t >= 0) || !std::isfinite(t)) std::abort();
        }
  });
  return 0;
}
