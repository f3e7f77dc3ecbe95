// Fuzzes the profile loader: anything it accepts round-trips exactly and prices positive, finite times.
#include <cmath>

#include "fuzz_common.hpp"
#include "reshard/profile.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace reshard;
  std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::only_reshard_errors([&] {
    Profile p = profile_from_json(text);
    std::string dumped = profile_to_json(p);
    if (profile_to_json(profile_from_json(dumped)) != dumped) std::abort();
    for (double bytes : {0.0, 1.0, 4096.0, 1e9}) {
      double t = p.intra_node.p2p.time_us(bytes);
      if (!(t >= 0) || std::isinf(t)) std::abort();
    }
  });
  return 0;
}
