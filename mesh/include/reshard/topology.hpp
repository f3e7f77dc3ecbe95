// Topology: which ranks share a node. Ranks r and r' share a node when r / ranks_per_node == r' / ranks_per_node.
#pragma once

#include "reshard/error.hpp"

namespace reshard {

enum class LinkClass { kIntraNode, kInterNode };

struct Topology {
  int ranks_per_node = 8;   // ranks (GPUs) on one node; a mesh smaller than this lives on one node
  bool peer_access = true;  // the GPUs of a node can address each other's memory (NVLink / PCIe peer access)

  int node_of(int rank) const { return rank / ranks_per_node; }
  bool same_node(int a, int b) const { return node_of(a) == node_of(b); }
  LinkClass link(int a, int b) const { return same_node(a, b) ? LinkClass::kIntraNode : LinkClass::kInterNode; }
  void validate() const { RESHARD_REQUIRE(ranks_per_node >= 1, "ranks per node must be >= 1, got ", ranks_per_node); }
};

}  // namespace reshard
