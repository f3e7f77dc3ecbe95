#include "lowering/issue_order.hpp"

#include <algorithm>
#include <functional>

namespace reshard::detail {

std::vector<size_t> issue_order(const std::vector<Transfer>& transfers, int rank, int world, bool push) {
  const auto issuer = [&](const Transfer& t) { return push ? t.src : t.dst; };
  const auto other = [&](const Transfer& t) { return push ? t.dst : t.src; };
  std::vector<std::vector<size_t>> left(world);  // issuer -> its copies not yet placed, in staggered order
  for (size_t i = 0; i < transfers.size(); ++i)
    if (!transfers[i].is_local()) left[issuer(transfers[i])].push_back(i);
  const auto distance = [&](size_t i) { return (transfers[i].dst - transfers[i].src + world) % world; };
  for (std::vector<size_t>& l : left)
    std::stable_sort(l.begin(), l.end(), [&](size_t x, size_t y) { return distance(x) < distance(y); });
  std::vector<size_t> mine;
  std::vector<int> owner(world), match(world);  // other end -> issuer matched to it; issuer -> its match
  std::vector<char> seen(world);
  std::vector<int> inbound(world);  // other end -> copies left that end at it
  for (const std::vector<size_t>& l : left)
    for (size_t i : l) ++inbound[other(transfers[i])];
  std::vector<std::vector<size_t>> tries(world);  // issuer -> left[u], the busiest other ends first
  const std::function<bool(int)> augment = [&](int u) {
    for (size_t i : tries[u]) {
      const int v = other(transfers[i]);
      if (seen[v]) continue;
      seen[v] = 1;
      if (owner[v] < 0 || augment(owner[v])) {
        owner[v] = u;
        match[u] = v;
        return true;
      }
    }
    return false;
  };
  while (!left[rank].empty()) {
    std::fill(owner.begin(), owner.end(), -1);
    std::fill(match.begin(), match.end(), -1);
    // The busiest issuers first, each trying the busiest other ends first: they bound the positions left.
    std::vector<int> issuers;
    for (int u = 0; u < world; ++u) {
      if (left[u].empty()) continue;
      issuers.push_back(u);
      tries[u] = left[u];
      std::stable_sort(tries[u].begin(), tries[u].end(),
                       [&](size_t x, size_t y) { return inbound[other(transfers[x])] > inbound[other(transfers[y])]; });
    }
    std::stable_sort(issuers.begin(), issuers.end(), [&](int x, int y) { return left[x].size() > left[y].size(); });
    for (int u : issuers) {
      std::fill(seen.begin(), seen.end(), 0);
      augment(u);
    }
    for (int u = 0; u < world; ++u) {
      if (left[u].empty()) continue;
      auto it = left[u].begin();
      if (match[u] >= 0)
        it = std::find_if(left[u].begin(), left[u].end(), [&](size_t i) { return other(transfers[i]) == match[u]; });
      if (u == rank) mine.push_back(*it);
      --inbound[other(transfers[*it])];
      left[u].erase(it);
    }
  }
  return mine;
}

}  // namespace reshard::detail
