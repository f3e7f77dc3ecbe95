// Human-readable and JSON renderings of a Layout (used by `reshard layout`).
#pragma once

#include <string>

#include "reshard/layout.hpp"

namespace reshard {

// One line per rank: rank, mesh coordinate, local shape, global offset and the block it holds.
std::string layout_table(const Layout& layout);

// The conformance fixture's case format plus "rank" in every entry:
// {"mesh": [..], "placements": [..], "global_shape": [..],
//  "ranks": [{"rank": r, "coord": [..], "local_shape": [..], "global_offset": [..]}, ...]}
std::string layout_json(const Layout& layout, int indent = 2);

// An ASCII picture of which ranks hold which block, for 1-D and 2-D tensors (like DTensor's
// visualize_sharding). Returns an explanatory line for other ranks or when the grid would be too large.
std::string layout_picture(const Layout& layout);

}  // namespace reshard
