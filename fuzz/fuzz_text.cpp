// Fuzzes the text parsers: meshes, shapes, placements, dtypes, strategies, step kinds.
#include "fuzz_common.hpp"
#include "reshard/layout.hpp"
#include "reshard/plan.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace reshard;
  std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::only_reshard_errors([&] { parse_mesh_shape(text); });
  fuzz::only_reshard_errors([&] { parse_shape(text); });
  fuzz::only_reshard_errors([&] { parse_dtype(text); });
  fuzz::only_reshard_errors([&] { parse_strategy(text); });
  fuzz::only_reshard_errors([&] { parse_step_kind(text); });
  fuzz::only_reshard_errors([&] {
    std::vector<Placement> ps = parse_placements(text);
    // Canonical text parses back to the same placements.
    if (parse_placements(to_string(ps)) != ps) std::abort();
  });
  // mesh | placements | shape, as the CLI takes them.
  size_t a = text.find('|'), b = a == std::string::npos ? a : text.find('|', a + 1);
  if (b != std::string::npos) {
    fuzz::only_reshard_errors([&] {
      Layout l(Mesh(parse_mesh_shape(text.substr(0, a))), parse_placements(text.substr(a + 1, b - a - 1)),
               parse_shape(text.substr(b + 1)));
      // Boxes stay inside the tensor; an empty one may sit at offset == extent (PyTorch's convention).
      if (l.mesh().world_size() <= 4096)
        for (int r = 0; r < l.mesh().world_size(); ++r) {
          Box box = l.box(r);
          for (int d = 0; d < box.ndim(); ++d) {
            if (box.shape[d] < 0 || box.offset[d] < 0) std::abort();
            if (box.offset[d] + box.shape[d] > l.global_shape()[d]) std::abort();
          }
        }
    });
  }
  return 0;
}
