#include "reshard/layout_format.hpp"

#include <algorithm>
#include <iomanip>
#include <nlohmann/json.hpp>

#include <set>
#include <sstream>
#include "reshard/detail/json_text.hpp"

namespace reshard {
namespace {

constexpr int kMaxPictureCells = 48;  // per tensor dim
constexpr size_t kMaxLabel = 14;

std::string ranks_label(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(ranks[i]);
  }
  if (s.size() > kMaxLabel) s = std::to_string(ranks.size()) + " ranks";
  return s;
}

// Sorted cut points of one tensor dim: 0, the extent, and every non-empty box boundary.
std::vector<Index> cuts(const Layout& layout, int d) {
  std::set<Index> c{0, layout.global_shape()[d]};
  for (int r = 0; r < layout.mesh().size(); ++r) {
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

}  // namespace

std::string layout_table(const Layout& layout) {
  std::ostringstream os;
  os << "layout " << layout.str() << "\n";
  os << std::left << std::setw(6) << "rank" << std::setw(14) << "coord" << std::setw(18) << "local_shape"
     << std::setw(18) << "global_offset"
     << "block\n";
  for (int r = 0; r < layout.mesh().size(); ++r) {
    const LocalShard b = layout.local_shard(r);
    os << std::left << std::setw(6) << r << std::setw(14) << to_list_string(layout.mesh().coord_of(r)) << std::setw(18)
       << to_list_string(b.shape) << std::setw(18) << to_list_string(b.offset) << block_text(layout, r) << "\n";
  }
  return os.str();
}

std::string layout_json(const Layout& layout, int indent) {
  nlohmann::ordered_json j;
  j["mesh"] = layout.mesh().shape();
  if (layout.mesh().has_explicit_ranks()) j["mesh_ranks"] = layout.mesh().explicit_ranks();
  std::vector<std::string> ps;
  for (const Placement& p : layout.placements()) ps.push_back(to_string(p));
  j["placements"] = ps;
  j["global_shape"] = layout.global_shape().vec();
  nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
  for (int r = 0; r < layout.mesh().size(); ++r) {
    const LocalShard b = layout.local_shard(r);
    nlohmann::ordered_json e;
    e["rank"] = r;
    e["coord"] = layout.mesh().coord_of(r).vec();
    e["local_shape"] = b.shape.vec();
    e["global_offset"] = b.offset.vec();
    ranks.push_back(std::move(e));
  }
  j["ranks"] = std::move(ranks);
  return indent > 0 ? detail::json_text(j, indent) : j.dump();
}

std::string layout_picture(const Layout& layout) {
  int nd = layout.ndim();
  if (nd < 1 || nd > 2) return "(picture drawn for 1-D and 2-D tensors only)\n";
  if (!layout.one_box_per_rank()) return "(picture drawn for layouts with one box per rank only)\n";
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
      for (int r = 0; r < layout.mesh().size(); ++r)
        if (contains(layout.box(r), cell)) holders.push_back(r);
      label[i][j] = ranks_label(holders);
    }
  }
  std::vector<size_t> width(ncols);
  for (int j = 0; j < ncols; ++j) {
    width[j] = std::to_string(cols[j]).size() + std::to_string(cols[j + 1]).size() + 1;
    for (int i = 0; i < nrows; ++i) width[j] = std::max(width[j], label[i][j].size());
    width[j] += 2;
  }
  size_t row_head = 0;
  if (nd == 2)
    for (int i = 0; i < nrows; ++i)
      row_head = std::max(row_head, (std::to_string(rows[i]) + ":" + std::to_string(rows[i + 1])).size());
  auto centered = [](const std::string& s, size_t w) {
    size_t left = (w - s.size()) / 2;
    return std::string(left, ' ') + s + std::string(w - s.size() - left, ' ');
  };
  std::ostringstream os;
  os << "ranks holding each block of " << layout.str() << " (rows x cols; ranges are half-open)\n";
  os << std::string(row_head + 1, ' ');
  for (int j = 0; j < ncols; ++j)
    os << centered(std::to_string(cols[j]) + ":" + std::to_string(cols[j + 1]), width[j] + 1);
  os << "\n";
  std::string rule = std::string(row_head + 1, ' ') + "+";
  for (int j = 0; j < ncols; ++j) rule += std::string(width[j], '-') + "+";
  os << rule << "\n";
  for (int i = 0; i < nrows; ++i) {
    std::string head = nd == 2 ? std::to_string(rows[i]) + ":" + std::to_string(rows[i + 1]) : "";
    os << std::setw(static_cast<int>(row_head)) << std::right << head << " |";
    for (int j = 0; j < ncols; ++j) os << centered(label[i][j], width[j]) << "|";
    os << "\n" << rule << "\n";
  }
  std::vector<int> empty;
  for (int r = 0; r < layout.mesh().size(); ++r)
    if (is_empty(layout.box(r))) empty.push_back(r);
  if (!empty.empty()) {
    os << "ranks with an empty shard:";
    for (int r : empty) os << " " << r;
    os << "\n";
  }
  if (layout.has_partial()) os << "(Partial mesh dims: each listed rank holds a partial value of the block)\n";
  return os.str();
}

}  // namespace reshard
