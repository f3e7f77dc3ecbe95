#include "plan/relays.hpp"

#include <algorithm>
#include <numeric>
#include <tuple>

#include "plan/cross_mesh_transfers.hpp"
#include "reshard/overlap.hpp"

namespace reshard::detail {
namespace {

bool box_less(const Box& a, const Box& b) {
  return std::lexicographical_compare(a.offset.begin(), a.offset.end(), b.offset.begin(), b.offset.end()) ||
         (a.offset == b.offset &&
          std::lexicographical_compare(a.shape.begin(), a.shape.end(), b.shape.begin(), b.shape.end()));
}

// Calls f(group) for every group of the rule (indexes into `transfers`, in receiving rank order) of two or more.
template <class F>
void for_each_group(const std::vector<Transfer>& transfers, const Topology& topology, F f) {
  std::vector<size_t> order;
  for (size_t i = 0; i < transfers.size(); ++i)
    if (!transfers[i].is_local() && !topology.same_node(transfers[i].src, transfers[i].dst)) order.push_back(i);
  auto key_less = [&](size_t i, size_t j) {
    const Transfer &x = transfers[i], &y = transfers[j];
    if (x.src != y.src) return x.src < y.src;
    const int nx = topology.node_of(x.dst), ny = topology.node_of(y.dst);
    if (nx != ny) return nx < ny;
    if (box_less(x.region, y.region)) return true;
    if (box_less(y.region, x.region)) return false;
    return x.dst < y.dst;
  };
  std::sort(order.begin(), order.end(), key_less);
  std::vector<size_t> group;
  for (size_t b = 0; b < order.size();) {
    const Transfer& first = transfers[order[b]];
    size_t e = b + 1;
    while (e < order.size()) {
      const Transfer& t = transfers[order[e]];
      if (t.src != first.src || topology.node_of(t.dst) != topology.node_of(first.dst) || !(t.region == first.region))
        break;
      ++e;
    }
    if (e - b >= 2) {
      group.assign(order.begin() + static_cast<std::ptrdiff_t>(b), order.begin() + static_cast<std::ptrdiff_t>(e));
      f(group);
    }
    b = e;
  }
}

}  // namespace

void relay_transfers(std::vector<Transfer>& transfers, const Topology& topology) {
  for (Transfer& t : transfers) t.via = -1;
  for_each_group(transfers, topology, [&](const std::vector<size_t>& group) {
    const int relay = transfers[group[static_cast<size_t>(transfers[group.front()].src) % group.size()]].dst;
    for (size_t i : group)
      if (transfers[i].dst != relay) transfers[i].via = relay;
  });
}

bool relays_any(const std::vector<Transfer>& transfers, const Topology& topology) {
  bool any = false;
  for_each_group(transfers, topology, [&](const std::vector<size_t>&) { any = true; });
  return any;
}

std::vector<Transfer> rank_relayed_transfers(std::vector<Transfer> node_in, std::vector<Transfer> from_rank, int rank,
                                             const Topology& topology) {
  relay_transfers(node_in, topology);
  relay_transfers(from_rank, topology);
  std::vector<Transfer> out;
  auto mine = [&](const Transfer& t) { return t.src == rank || t.dst == rank || t.via == rank; };
  for (const Transfer& t : node_in)
    if (mine(t) && t.src != rank) out.push_back(t);
  for (const Transfer& t : from_rank) out.push_back(t);
  std::sort(out.begin(), out.end(),
            [](const Transfer& x, const Transfer& y) { return std::tie(x.src, x.dst) < std::tie(y.src, y.dst); });
  return out;
}

std::vector<Transfer> per_node_transfers(const Layout& from, const Layout& to, const Topology& topology,
                                         int element_size) {
  if (needs_cross_mesh(from, to))
    return cross_mesh_transfers(from, to, topology, element_size, std::nullopt, HolderSpread::kPerNode);
  return OverlapIndex(from, to, topology, element_size, HolderSpread::kPerNode).all_transfers();
}

std::vector<Transfer> planned_transfers(const Layout& from, const Layout& to, const Topology& topology,
                                        int element_size, std::optional<int> scope, bool relayed,
                                        const OverlapIndex* known) {
  const bool cross = needs_cross_mesh(from, to);
  const HolderSpread spread = relayed ? HolderSpread::kPerNode : HolderSpread::kPerRank;
  if (known && known->spread() != spread) known = nullptr;
  std::optional<OverlapIndex> made;
  if (!cross && !known) made.emplace(from, to, topology, element_size, spread);
  const OverlapIndex* index = known ? known : made ? &*made : nullptr;
  if (!scope) {
    std::vector<Transfer> all =
        cross ? cross_mesh_transfers(from, to, topology, element_size, std::nullopt, spread) : index->all_transfers();
    if (relayed) relay_transfers(all, topology);
    return all;
  }
  const int rank = *scope;
  // Every transfer into `r` and (`sent`) every one `r` sends.
  auto into = [&](int r, std::vector<Transfer>& out) {
    if (!cross) return index->transfers_into(r, out);
    for (const Transfer& t : cross_mesh_transfers(from, to, topology, element_size, r, spread))
      if (t.dst == r) out.push_back(t);
  };
  std::vector<Transfer> sent;
  if (cross) {
    for (const Transfer& t : cross_mesh_transfers(from, to, topology, element_size, rank, spread))
      if (t.src == rank) sent.push_back(t);
  } else {
    index->transfers_from(rank, sent);
  }
  if (!relayed) {
    std::vector<Transfer> in;
    into(rank, in);
    for (const Transfer& t : in)
      if (t.src != rank) sent.push_back(t);
    std::sort(sent.begin(), sent.end(),
              [](const Transfer& x, const Transfer& y) { return std::tie(x.src, x.dst) < std::tie(y.src, y.dst); });
    return sent;
  }
  std::vector<Transfer> node_in;
  const int world = from.mesh().world_size();
  const int first = topology.node_of(rank) * topology.ranks_per_node;
  for (int r = first; r < world && topology.same_node(r, rank); ++r) into(r, node_in);
  return rank_relayed_transfers(std::move(node_in), std::move(sent), rank, topology);
}

}  // namespace reshard::detail
