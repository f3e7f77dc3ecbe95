// Human-readable and JSON renderings of a Layout (used by `reshard layout`). Every rendering is bounded for large
// meshes: tables list the first and last ranks, pictures are drawn for meshes up to kMaxPictureRanks, JSON is written
// one rank at a time.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "reshard/layout.hpp"

namespace reshard {

inline constexpr int kMaxTableRanks = 64;      // a table lists the first and last 32 ranks beyond this
inline constexpr int kMaxPictureRanks = 4096;  // larger meshes get a line saying so instead of a picture

// One line per rank: rank, mesh coordinate, local shape, global offset and the block it holds. `rank`: that rank
// only. Over kMaxTableRanks ranks, the first and last kMaxTableRanks / 2 and a line counting the others.
std::string layout_table(const Layout& layout, std::optional<int> rank = std::nullopt);

// The conformance fixture's case format plus "rank" in every entry:
// {"mesh": [..], "placements": [..], "global_shape": [..],
//  "ranks": [{"rank": r, "coord": [..], "local_shape": [..], "global_offset": [..]}, ...]}
// `rank`: only that rank's entry. indent 0: one line.
std::string layout_json(const Layout& layout, int indent = 2, std::optional<int> rank = std::nullopt);
// The same text (indent 2), handed to `write` a piece at a time (one rank entry per call), so that a large mesh is
// never held in memory at once.
void write_layout_json(const Layout& layout, const std::function<void(std::string_view)>& write,
                       std::optional<int> rank = std::nullopt);
// About how many bytes layout_json prints (the number of ranks times the longer of the first and last rank's entry),
// computed in constant time, for refusing outputs too large to be useful.
Index layout_json_bytes_estimate(const Layout& layout);

// An ASCII picture of which ranks hold which block, for 1-D and 2-D tensors (like DTensor's
// visualize_sharding). Returns an explanatory line for other ranks, meshes over kMaxPictureRanks, or when the grid
// would be too large.
std::string layout_picture(const Layout& layout);

}  // namespace reshard
