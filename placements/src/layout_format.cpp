#include "reshard/layout_format.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "reshard/detail/json_text.hpp"

namespace reshard {
namespace {

constexpr int kMaxPictureCells = 48;  // per tensor dim
constexpr size_t kMaxLabel = 14;

// The mesh's ranks in ascending order, the order of tables and JSON: 0..n-1 (nothing stored) for a mesh that spans its
// world, else its rank list sorted.
class MemberRanks {
 public:
  explicit MemberRanks(const Mesh& mesh) : size_(mesh.size()) {
    if (mesh.world_size() == mesh.size()) return;
    sorted_ = mesh.ranks();
    std::sort(sorted_.begin(), sorted_.end());
  }
  int size() const { return size_; }
  int operator[](int i) const { return sorted_.empty() ? i : sorted_[i]; }

 private:
  int size_;
  std::vector<int> sorted_;
};

std::string ranks_label(const std::vector<int>& ranks) {
  std::string s = fmt::format("{}", fmt::join(ranks, ","));
  if (s.size() > kMaxLabel) s = fmt::format("{} ranks", ranks.size());
  return s;
}

// Sorted cut points of one tensor dim: 0, the extent, and every non-empty box boundary.
std::vector<Index> cuts(const Layout& layout, int d) {
  std::set<Index> c{0, layout.global_shape()[d]};
  for (int r = 0; r < layout.mesh().world_size(); ++r) {  // ranks outside the mesh hold empty boxes
    Box b = layout.box(r);
    if (is_empty(b)) continue;
    c.insert(b.offset[d]);
    c.insert(b.offset[d] + b.shape[d]);
  }
  return {c.begin(), c.end()};
}

// What a rank holds: its box, or (a _StridedShard layout that is not one box per rank) its ranges per tensor dim.
std::string block_text(const Layout& layout, int r) {
  if (layout.one_box_per_rank()) return to_string(layout.box(r));
  const Dims coord = layout.mesh().coord_of(r);
  std::string s = "[";
  for (int d = 0; d < layout.ndim(); ++d) {
    if (d) s += ", ";
    const std::vector<Interval> rs = layout.ranges(d, coord);
    if (rs.empty()) s += "(empty)";
    for (size_t i = 0; i < rs.size(); ++i) s += cat(i ? "+" : "", rs[i].begin, ":", rs[i].end());
  }
  return s + "]";
}

constexpr const char* kRowFormat = "{:<5} {:<13} {:<17} {:<17} {}\n";

std::string table_row(const Layout& layout, int r) {
  const LocalShard b = layout.local_shard(r);
  return fmt::format(kRowFormat, r, to_list_string(layout.mesh().coord_of(r)), to_list_string(b.shape),
                     to_list_string(b.offset), block_text(layout, r));
}

nlohmann::ordered_json rank_entry(const Layout& layout, int r) {
  const LocalShard b = layout.local_shard(r);
  nlohmann::ordered_json e;
  e["rank"] = r;
  e["coord"] = layout.mesh().coord_of(r).vec();
  e["local_shape"] = b.shape.vec();
  e["global_offset"] = b.offset.vec();
  return e;
}

// The document without its rank entries ("ranks": []), in the order layout_json prints it.
nlohmann::ordered_json document_head(const Layout& layout) {
  nlohmann::ordered_json j;
  j["mesh"] = layout.mesh().shape();
  if (layout.mesh().has_explicit_ranks()) j["mesh_ranks"] = layout.mesh().explicit_ranks();
  if (layout.mesh().world_size() != layout.mesh().size()) j["world_size"] = layout.mesh().world_size();
  std::vector<std::string> ps;
  for (const Placement& p : layout.placements()) ps.push_back(to_string(p));
  j["placements"] = ps;
  j["global_shape"] = layout.global_shape().vec();
  return j;
}

std::string entry_text(const Layout& layout, int r) {
  std::string out;
  detail::write_json_text(rank_entry(layout, r), out, 2, 1 << 30, 2);
  return out;
}

}  // namespace

std::string layout_table(const Layout& layout, std::optional<int> rank) {
  const int n = layout.mesh().size();
  const MemberRanks ranks(layout.mesh());
  std::string out = fmt::format("layout {}\n", layout.str());
  out += fmt::format(kRowFormat, "rank", "coord", "local_shape", "global_offset", "block");
  if (rank) return out + table_row(layout, *rank);
  if (n <= kMaxTableRanks) {
    for (int i = 0; i < n; ++i) out += table_row(layout, ranks[i]);
    return out;
  }
  const int half = kMaxTableRanks / 2;
  for (int i = 0; i < half; ++i) out += table_row(layout, ranks[i]);
  out += fmt::format("... {} more ranks (--rank R shows one) ...\n", n - 2 * half);
  for (int i = n - half; i < n; ++i) out += table_row(layout, ranks[i]);
  return out;
}

void write_layout_json(const Layout& layout, const std::function<void(std::string_view)>& write,
                       std::optional<int> rank) {
  nlohmann::ordered_json head = document_head(layout);
  std::string text = "{\n";
  for (auto it = head.begin(); it != head.end(); ++it) {
    text += "  " + nlohmann::ordered_json(it.key()).dump() + ": ";
    detail::write_json_text(*it, text, 2, 110, 1);
    text += ",\n";
  }
  text += "  \"ranks\": [\n";
  write(text);
  const MemberRanks members(layout.mesh());
  const int count = rank ? 1 : members.size();
  for (int i = 0; i < count; ++i)
    write("    " + entry_text(layout, rank ? *rank : members[i]) + (i + 1 < count ? ",\n" : "\n"));
  write("  ]\n}");
}

std::string layout_json(const Layout& layout, int indent, std::optional<int> rank) {
  if (indent > 0) {
    std::string out;
    write_layout_json(
        layout, [&](std::string_view piece) { out += piece; }, rank);
    return out;
  }
  nlohmann::ordered_json j = document_head(layout);
  nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
  const MemberRanks members(layout.mesh());
  for (int i = 0; i < (rank ? 1 : members.size()); ++i) ranks.push_back(rank_entry(layout, rank ? *rank : members[i]));
  j["ranks"] = std::move(ranks);
  return j.dump();
}

Index layout_json_bytes_estimate(const Layout& layout) {
  const int n = layout.mesh().size();
  const MemberRanks ranks(layout.mesh());
  const Index entry =
      static_cast<Index>(std::max(entry_text(layout, ranks[0]).size(), entry_text(layout, ranks[n - 1]).size())) + 6;
  return static_cast<Index>(n) * entry + 256;
}

std::string layout_picture(const Layout& layout) {
  int nd = layout.ndim();
  if (nd < 1 || nd > 2) return "(picture drawn for 1-D and 2-D tensors only)\n";
  if (!layout.one_box_per_rank()) return "(picture drawn for layouts with one box per rank only)\n";
  if (layout.mesh().size() > kMaxPictureRanks)
    return fmt::format("(picture drawn for meshes of up to {} ranks; --rank R shows one rank's block)\n",
                       kMaxPictureRanks);
  std::vector<Index> rows = nd == 2 ? cuts(layout, 0) : std::vector<Index>{0, 1};
  std::vector<Index> cols = cuts(layout, nd - 1);
  int nrows = static_cast<int>(rows.size()) - 1, ncols = static_cast<int>(cols.size()) - 1;
  if (nrows > kMaxPictureCells || ncols > kMaxPictureCells) return "(too many blocks to draw)\n";
  if (nrows <= 0 || ncols <= 0) return "(empty tensor: nothing to draw)\n";

  std::vector<std::vector<std::string>> label(nrows, std::vector<std::string>(ncols));
  for (int i = 0; i < nrows; ++i) {
    for (int j = 0; j < ncols; ++j) {
      Box cell = nd == 2 ? Box{{rows[i], cols[j]}, {rows[i + 1] - rows[i], cols[j + 1] - cols[j]}}
                         : Box{{cols[j]}, {cols[j + 1] - cols[j]}};
      std::vector<int> holders;
      for (int r = 0; r < layout.mesh().world_size(); ++r)
        if (layout.mesh().contains(r) && contains(layout.box(r), cell)) holders.push_back(r);
      label[i][j] = ranks_label(holders);
    }
  }
  auto range = [](Index a, Index b) { return fmt::format("{}:{}", a, b); };
  std::vector<size_t> width(ncols);
  for (int j = 0; j < ncols; ++j) {
    width[j] = range(cols[j], cols[j + 1]).size();
    for (int i = 0; i < nrows; ++i) width[j] = std::max(width[j], label[i][j].size());
    width[j] += 2;
  }
  size_t row_head = 0;
  if (nd == 2)
    for (int i = 0; i < nrows; ++i) row_head = std::max(row_head, range(rows[i], rows[i + 1]).size());
  std::string out = fmt::format("ranks holding each block of {} (rows x cols; ranges are half-open)\n", layout.str());
  out += std::string(row_head + 1, ' ');
  for (int j = 0; j < ncols; ++j) out += fmt::format("{:^{}}", range(cols[j], cols[j + 1]), width[j] + 1);
  out += "\n";
  std::string rule = std::string(row_head + 1, ' ') + "+";
  for (int j = 0; j < ncols; ++j) rule += std::string(width[j], '-') + "+";
  out += rule + "\n";
  for (int i = 0; i < nrows; ++i) {
    out += fmt::format("{:>{}} |", nd == 2 ? range(rows[i], rows[i + 1]) : "", row_head);
    for (int j = 0; j < ncols; ++j) out += fmt::format("{:^{}}|", label[i][j], width[j]);
    out += "\n" + rule + "\n";
  }
  std::vector<int> empty;
  for (int r = 0; r < layout.mesh().world_size(); ++r)
    if (layout.mesh().contains(r) && is_empty(layout.box(r))) empty.push_back(r);
  if (!empty.empty()) out += fmt::format("ranks with an empty shard: {}\n", fmt::join(empty, " "));
  if (layout.has_partial()) out += "(Partial mesh dims: each listed rank holds a partial value of the block)\n";
  return out;
}

}  // namespace reshard
