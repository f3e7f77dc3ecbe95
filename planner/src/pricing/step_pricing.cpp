#include "pricing/step_pricing.hpp"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "plan/node_split.hpp"
#include "plan/transitions.hpp"
#include "pricing/transfer_classes.hpp"

namespace reshard::detail {
namespace {

// The first rank, the last and the lowest with the largest box, ascending and distinct (no allocation: pricing runs
// in the searches' inner loops).
struct Representatives {
  int rank[3];
  int n = 0;
  const int* begin() const { return rank; }
  const int* end() const { return rank + n; }
};

Representatives representatives(const RankBoxes& boxes) {
  Representatives r{{0, boxes.size() - 1, boxes.max_volume_rank()}, 3};
  std::sort(r.rank, r.rank + 3);
  r.n = static_cast<int>(std::unique(r.rank, r.rank + 3) - r.rank);
  return r;
}

}  // namespace

// Pricers' scratch kept on this thread for the next pricer: at most kKept, none holding the exchanges of more than
// kMaxRanks ranks (their memory goes back to the allocator).
struct StepPricer::Pool {
  static constexpr int kKept = 4;
  static constexpr size_t kMaxRanks = size_t{1} << 16;
  Pool() = default;
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;
  ~Pool() {
    for (int i = 0; i < n; ++i) delete kept[i];
  }
  Scratch* kept[kKept] = {};
  int n = 0;
};

StepPricer::Pool& StepPricer::pool() {
  thread_local Pool p;
  return p;
}

StepPricer::Scratch* StepPricer::take_scratch() {
  Pool& p = pool();
  return p.n > 0 ? p.kept[--p.n] : new Scratch();
}

void StepPricer::GiveBack::operator()(Scratch* s) const noexcept {
  Pool& p = pool();
  if (p.n < Pool::kKept && s->ranks.capacity() <= Pool::kMaxRanks)
    p.kept[p.n++] = s;
  else
    delete s;
}

StepPrice StepPricer::collective(const RankBoxes& a, const RankBoxes& b, StepKind kind, std::span<const int> dims,
                                 AllReduceForm form) const {
  StepPrice p = collective_wire(a, b, kind, dims, form);
  if (is_communication(kind)) p.us = model_.with_overhead(p.us);
  return p;
}

StepPrice StepPricer::collective_wire(const RankBoxes& a, const RankBoxes& b, StepKind kind, std::span<const int> dims,
                                      AllReduceForm form) const {
  const Mesh& mesh = a.layout().mesh();
  const int n = mesh.group_size(dims);
  const LinkClass link = group_link(mesh, dims, model_.topology());
  StepPrice p;
  switch (kind) {
    case StepKind::kLocal: {
      const int r = b.max_volume_rank();
      const bool engine =
          local_copy_engine_for(b[r], a[r], b[r], es_, model_.profile().nvlink.copy_engine_min_row_bytes,
                                model_.low_sm()) == CopyEngine::kCopyEngine;
      p.us = engine ? model_.copy_engine_us(b.max_volume() * es_) : model_.copy_us(b.max_volume() * es_);
      return p;
    }
    case StepKind::kAllGather: {
      double pack = 0, unpack = 0;
      for (int r : representatives(a)) {
        const GroupShape g = gather_shape(a, b, dims, r);
        if (!g.send_in_place) pack = std::max(pack, model_.copy_us(a.volume(r) * es_));
        if (!g.recv_in_place) unpack = std::max(unpack, model_.copy_us(g.chunk * n * es_));
      }
      p.us = pack + model_.all_gather_us(n, a.max_volume() * es_, link) + unpack;
      p.bytes_moved = a.total_volume() * (n - 1) * es_;
      return p;
    }
    case StepKind::kReduceScatter: {
      double pack = 0, unpack = 0;
      for (int r : representatives(b)) {
        const GroupShape s = scatter_shape(a, b, dims, r);
        if (!s.send_in_place) pack = std::max(pack, model_.copy_us(s.chunk * n * es_));
        if (!s.recv_in_place) unpack = std::max(unpack, model_.copy_us(b.volume(r) * es_));
      }
      p.us = pack + model_.reduce_scatter_us(n, b.max_volume() * es_, link) + unpack;
      p.bytes_moved = b.total_volume() * (n - 1) * es_;
      return p;
    }
    case StepKind::kAllReduce: {
      p.us = model_.all_reduce_us(n, a.max_volume() * es_, link);
      p.bytes_moved = 2 * (n - 1) * a.total_volume() * es_ / std::max(n, 1);
      if (form == AllReduceForm::kFlat) return p;
      const bool given = form != AllReduceForm::kCheaper;
      const Transport nodes = form == AllReduceForm::kHierarchicalOneSided ? Transport::kNvlink : Transport::kNccl;
      const std::optional<StepPrice> h = hierarchical_all_reduce(a, dims, nodes);
      RESHARD_REQUIRE(h || !given, "a hierarchical all_reduce over mesh dims ",
                      join(std::vector<int>(dims.begin(), dims.end())),
                      " needs groups with the same number (more than one) of members on each of several nodes, "
                      "the innermost dim a multiple of it, and pieces of equal size");
      if (given) return *h;
      const std::optional<StepPrice> cheapest = cheapest_hierarchical(a, dims);
      return cheapest && cheapest->us < p.us ? *cheapest : p;
    }
    case StepKind::kAllToAll: {
      RankTraffic worst;
      const int li = static_cast<int>(link);
      for (int r = 0; r < a.size(); ++r) {
        Index keep = volume(intersect(a[r], b[r]));
        worst.out_bytes[li] = std::max(worst.out_bytes[li], (a.volume(r) - keep) * es_);
        worst.in_bytes[li] = std::max(worst.in_bytes[li], (b.volume(r) - keep) * es_);
        worst.local_bytes = std::max(worst.local_bytes, keep * es_);
        p.bytes_moved += (a.volume(r) - keep) * es_;
      }
      for (int r : representatives(a)) {
        const RankTraffic t = all_to_all_exchange(a, b, dims, r, exchange_rules(Transport::kNccl, false),
                                                  model_.topology(), scratch_->exchange)
                                  .traffic();
        worst.peers_out = std::max(worst.peers_out, t.peers_out);
        worst.peers_in = std::max(worst.peers_in, t.peers_in);
        worst.pack_bytes = std::max(worst.pack_bytes, t.pack_bytes);
        worst.unpack_bytes = std::max(worst.unpack_bytes, t.unpack_bytes);
        worst.stages = std::max(worst.stages, t.stages);
      }
      p.us = model_.exchange_rank_us(worst, true);
      return p;
    }
    case StepKind::kP2P:
      break;
  }
  fail(ErrorKind::kInternal, "p2p steps are priced from their transfers");
}

std::optional<StepPrice> StepPricer::hierarchical_all_reduce(const RankBoxes& a, std::span<const int> dims,
                                                             Transport node_stages) const {
  const Mesh& mesh = a.layout().mesh();
  if (group_link(mesh, dims, model_.topology()) != LinkClass::kInterNode) return std::nullopt;
  // An integer average truncates at every stage: only the flat all_reduce gives PyTorch's value.
  if (!is_floating(dtype_) && a.layout().placement(dims.front()).op() == ReduceOp::kAvg) return std::nullopt;
  const std::optional<NodeSplit> split = node_split(mesh, dims, model_.topology());
  if (!split) return std::nullopt;
  // Every rank's tensor splits into equal pieces, one per member on its node.
  for (int r = 0; r < a.size(); ++r)
    if (a.volume(r) % split->parts != 0) return std::nullopt;
  const Index piece = a.max_volume() / split->parts * es_;
  const int k = split->parts, m = split->nodes;
  StepPrice p;
  p.hierarchical = true;
  const double across = model_.all_reduce_us(m, piece, LinkClass::kInterNode);
  if (node_stages == Transport::kNvlink) {
    // One-sided node stages (Step::mixed), each a one-sided step of every member: the reduction reads the k - 1 other
    // contributions to its piece over NVLink (a kernel) and its own locally; the gather pulls the k - 1 other reduced
    // pieces (copy engines for pieces of at least the copy-engine row, else a kernel). Each member serves as much.
    RankTraffic reduce, gather;
    constexpr int kNode = static_cast<int>(LinkClass::kIntraNode);
    for (RankTraffic* t : {&reduce, &gather}) {
      t->in_bytes[kNode] = t->out_bytes[kNode] = (k - 1) * piece;
      t->peers_in = t->peers_out = k - 1;
    }
    reduce.kernel_in_bytes = (k - 1) * piece;
    reduce.local_bytes = piece;
    if (piece >= model_.profile().nvlink.copy_engine_min_row_bytes) {
      gather.engine_in_bytes = (k - 1) * piece;
      gather.engine_calls = k - 1;
    } else {
      gather.kernel_in_bytes = (k - 1) * piece;
    }
    p.node_one_sided = true;
    p.us = model_.one_sided_rank_us(reduce) + across + model_.one_sided_rank_us(gather);
    // Changing buffers: every (rank, member it reads) pair maps 2 new allocations a call, priced in the form's price.
    if (changing_buffers_) p.us += model_.profile().nvlink.map_us * 2.0 * a.size() * (k - 1);
  } else {
    p.us = model_.reduce_scatter_us(k, piece, LinkClass::kIntraNode) + across +
           model_.all_gather_us(k, piece, LinkClass::kIntraNode);
  }
  // Per member: (k - 1) pieces out in each node stage, 2 (m - 1) / m of a piece across nodes.
  const Index total = a.total_volume() * es_;
  p.bytes_moved = 2 * (total / k) * (k - 1) + 2 * (m - 1) * (total / k) / m;
  return p;
}

std::optional<StepPrice> StepPricer::cheapest_hierarchical(const RankBoxes& a, std::span<const int> dims) const {
  std::optional<StepPrice> best = hierarchical_all_reduce(a, dims);
  if (one_sided_node_stages_)
    if (std::optional<StepPrice> o = hierarchical_all_reduce(a, dims, Transport::kNvlink);
        o && (!best || o->us < best->us))
      best = o;
  return best;
}

double StepPricer::collective_floor(const RankBoxes& a, StepKind kind, std::span<const int> dims) const {
  if (!is_communication(kind)) return -std::numeric_limits<double>::infinity();
  // As collective_wire computes them: pack and unpack start at 0 and only grow, so with_overhead(pack + wire +
  // unpack) >= with_overhead(wire) (rounding is monotonic, with_overhead a max).
  double wire = -std::numeric_limits<double>::infinity();
  if (kind == StepKind::kAllGather || kind == StepKind::kAllReduce) {
    const Mesh& mesh = a.layout().mesh();
    const int n = mesh.group_size(dims);
    const LinkClass link = group_link(mesh, dims, model_.topology());
    wire = kind == StepKind::kAllGather ? model_.all_gather_us(n, a.max_volume() * es_, link)
                                        : model_.all_reduce_us(n, a.max_volume() * es_, link);
    if (kind == StepKind::kAllReduce)
      if (const std::optional<StepPrice> h = cheapest_hierarchical(a, dims)) wire = std::min(wire, h->us);
  }
  return model_.with_overhead(wire);
}

PricedStep StepPricer::p2p_step(const RankBoxes& a, const RankBoxes& b, Transport transport) {
  PricedStep ps;
  ps.step.kind = StepKind::kP2P;
  ps.step.from = a.layout().placements();
  ps.step.to = b.layout().placements();
  ps.step.transport = transport;
  return ps;
}

PricedStep StepPricer::p2p(const OverlapIndex& index, Transport transport) const {
  const RankBoxes &a = index.src_boxes(), &b = index.dst_boxes();
  const int n = a.size();
  PricedStep ps = p2p_step(a, b, transport);
  // A step that reduces Partial contributions copies every received one out of scratch (the reduction).
  const ExchangeRules rules = exchange_rules(transport, index.partial_roles().contributions > 1);
  const bool by_class = !reference_ && TransferClasses::applies(index);
  if (by_class && transport == Transport::kNvlink) {
    // Whether the step can run at all first: the lowest rank receiving across nodes names its first such transfer
    // (as the class pricing would, rank by rank), before any class table is built.
    const Topology& topology = model_.topology();
    for (int r = 0; r < n; ++r) {
      const std::optional<Transfer> t = index.first_transfer_into(
          r, [&](const Transfer& x) { return !x.is_local() && topology.link(x.src, x.dst) != LinkClass::kIntraNode; });
      if (t) {
        ps.unavailable = cross_node_reason(*t);
        return ps;
      }
    }
  }
  std::vector<RankExchange>& ranks = scratch_->ranks;  // reused by the pricer's steps and the next planning's
  ranks.resize(n, RankExchange(rules));
  for (RankExchange& x : ranks) x.reset(rules);
  const bool complete =
      by_class ? exchanges_by_class(index, rules, ranks, ps) : exchanges_by_transfer(index, rules, ranks, ps);
  if (!complete) return ps;  // unavailable
  finish_p2p(ranks, rules, ps);
  return ps;
}

void StepPricer::finish_p2p(const std::vector<RankExchange>& ranks, const ExchangeRules& rules, PricedStep& ps) const {
  const int n = static_cast<int>(ranks.size());
  const bool one_sided = rules.transport == Transport::kNvlink;
  ps.scratch.resize(n);
  ps.peer_reads = 0;
  double fused_us = 0;  // the step as one kernel per rank (its copies, or its reductions)
  int most_peers = 0;
  for (int r = 0; r < n; ++r) {
    ps.scratch[r] = ranks[r].scratch().total();
    const RankTraffic& t = ranks[r].traffic();
    if (one_sided) ps.peer_reads += t.peers_in;
    ps.step.estimated_us =
        std::max(ps.step.estimated_us, one_sided ? model_.one_sided_rank_us(t) : model_.exchange_rank_us(t, false));
    if (one_sided) fused_us = std::max(fused_us, model_.fused_rank_us(t));
    most_peers = std::max({most_peers, t.peers_in, t.peers_out});
  }
  if (ps.step.bytes_moved > 0)  // a step that moves nothing only copies locally
    ps.step.estimated_us =
        one_sided ? model_.one_sided_with_overhead(ps.step.estimated_us) : model_.with_overhead(ps.step.estimated_us);
  const bool fusable = one_sided && ps.step.bytes_moved > 0 && most_peers <= kMaxFusedPeers;
  if (fusable && fusion_ != Fusion::kNever && (fusion_ == Fusion::kAlways || fused_us < ps.step.estimated_us)) {
    ps.step.fused = true;
    ps.step.estimated_us = fused_us;
  }
}

void StepPricer::price_source_reads(PricedStep& ps, const RankBoxes& a, std::optional<bool> staged) const {
  Step& s = ps.step;
  if (s.mixed && s.kind == StepKind::kAllReduce) return;  // its mapping is priced with its form
  if (s.mixed) {  // its one-sided parts read the caller's tensors (never staged): mapping them, as below
    s.estimated_us += model_.profile().nvlink.map_us * std::max(1, ps.peer_reads);
    return;
  }
  if (s.kind != StepKind::kP2P || s.transport != Transport::kNvlink || s.bytes_moved == 0) return;
  Index largest = 0;
  for (int r = 0; r < a.size(); ++r) largest = std::max(largest, staged_source_elements(a, r));
  const double staging_us = model_.copy_engine_us(largest * es_);  // one contiguous copy on the copy engines
  // Opening a peer's new allocation serialises in the driver across the host's processes: every (rank, peer) pair
  // that reads pays it in turn.
  const double map_us = model_.profile().nvlink.map_us * std::max(1, ps.peer_reads);
  s.staged = staged.value_or(staging_us < map_us);
  if (!s.staged) {
    s.estimated_us += map_us;
    return;
  }
  s.estimated_us += staging_us;
  ps.scratch.resize(a.size(), 0);
  for (int r = 0; r < a.size(); ++r)
    ps.scratch[r] = std::max(ps.scratch[r], aligned_elements(staged_source_elements(a, r), es_));
}

std::string StepPricer::cross_node_reason(const Transfer& t) {
  // Plain concatenation, as cat() writes it: an auto plan builds this for every p2p step nvlink cannot carry.
  return "nvlink moves data within a node only; rank " + std::to_string(t.src) + " sends to rank " +
         std::to_string(t.dst) + " on another node";
}

bool StepPricer::exchanges_by_transfer(const OverlapIndex& index, const ExchangeRules& rules,
                                       std::vector<RankExchange>& ranks, PricedStep& ps) const {
  const RankBoxes &a = index.src_boxes(), &b = index.dst_boxes();
  const bool one_sided = rules.transport == Transport::kNvlink;
  std::vector<Transfer> buffer;
  // From the destination side every transfer is visited exactly once (the source side would also visit the
  // destinations that another replica serves); each is accounted on both of its ranks.
  for (int r = 0; r < a.size(); ++r) {
    buffer.clear();
    index.transfers_into(r, buffer);
    for (const Transfer& t : buffer) {
      if (t.is_local()) {
        ranks[t.dst].local(t, a[t.dst], b[t.dst]);
        continue;
      }
      const LinkClass link = model_.topology().link(t.src, t.dst);
      if (one_sided && link != LinkClass::kIntraNode) {  // the step cannot run: nothing more to price
        ps.unavailable = cross_node_reason(t);
        return false;
      }
      const Movement m = movement(t.region, a[t.src], b[t.dst], rules);  // once for both of its ranks
      ranks[t.src].send(t, m, link);
      ranks[t.dst].receive(t, m, link);
      ps.step.bytes_moved += t.bytes;
    }
  }
  return true;
}

bool StepPricer::exchanges_by_class(const OverlapIndex& index, const ExchangeRules& rules,
                                    std::vector<RankExchange>& ranks, PricedStep& ps) const {
  const RankBoxes &a = index.src_boxes(), &b = index.dst_boxes();
  const Topology& topology = model_.topology();
  const int n = a.size();
  const bool one_sided = rules.transport == Transport::kNvlink;
  const TransferClasses classes(index, scratch_->class_tables.classes);
  // Takes a transfer with region shape `region` (`other`: the shape of its other rank's box) out of its class; counts
  // it among the class's transfers on the node unless it is the rank's local copy.
  auto take_out = [](RankClasses& rc, const Dims& region, const Dims& other, bool local) {
    for (size_t k = 0; k < rc.classes.size(); ++k) {
      TransferClass& c = rc.classes[k];
      if (c.count > 0 && c.region.shape == region && c.other.shape == other) {
        --c.count;
        if (!local) ++rc.near[k];
        return;
      }
    }
    fail(ErrorKind::kInternal, "a p2p transfer on its node is in none of its rank's transfer classes");
  };
  // A transfer's figures depend on the shapes of its region and boxes and on its link only (transfer_classes.hpp),
  // so a class's transfers on the node are accounted together, and those across nodes together. Node by node: each
  // pair of the node's ranks is asked once (OverlapIndex::sends_to: the region's shape, no transfer built) and its
  // transfer taken out of the receiver's and the sender's classes; each rank's receiving side is accounted in rank
  // order (so that an unavailable step names the transfer the enumeration would), then each one's sending side.
  RankClasses& in = scratch_->class_tables.in;
  Dims region;  // a transfer's region shape
  std::vector<RankClasses>& out = scratch_->class_tables.out;
  for (int first = 0; first < n; first += topology.ranks_per_node) {
    const int p = std::min(n - first, topology.ranks_per_node);
    if (static_cast<int>(out.size()) < p) out.resize(p);
    for (int i = 0; i < p; ++i) {
      classes.outgoing(first + i, out[i].classes);
      out[i].near.assign(out[i].classes.size(), 0);
    }
    for (int j = 0; j < p; ++j) {
      const int r = first + j;
      classes.incoming(r, in.classes);
      in.near.assign(in.classes.size(), 0);
      for (int i = 0; i < p; ++i) {
        if (!index.sends_to(first + i, r, region)) continue;
        take_out(in, region, a[first + i].shape, i == j);
        take_out(out[i], region, b[r].shape, i == j);
        if (i == j) ranks[r].local(*index.transfer_between(r, r), a[r], b[r]);
      }
      for (size_t k = 0; k < in.classes.size(); ++k) {
        const TransferClass& c = in.classes[k];
        if (c.count > 0 && one_sided) {  // the enumeration's first transfer across nodes into r names the problem
          const std::optional<Transfer> t = index.first_transfer_into(r, [&](const Transfer& x) {
            return !x.is_local() && topology.link(x.src, x.dst) != LinkClass::kIntraNode;
          });
          if (!t) fail(ErrorKind::kInternal, "a transfer class across nodes has no transfer across nodes");
          ps.unavailable = cross_node_reason(*t);
          return false;
        }
        if (c.count == 0 && in.near[k] == 0) continue;
        const Transfer t{-1, r, c.region, volume(c.region) * es_};
        const Movement m = movement(c.region, c.other, b[r], rules);
        if (in.near[k] > 0) ranks[r].receive(t, m, LinkClass::kIntraNode, in.near[k]);
        if (c.count > 0) ranks[r].receive(t, m, LinkClass::kInterNode, c.count);
        ps.step.bytes_moved += t.bytes * (in.near[k] + c.count);
      }
    }
    for (int i = 0; i < p; ++i) {
      const int s = first + i;
      for (size_t k = 0; k < out[i].classes.size(); ++k) {
        const TransferClass& c = out[i].classes[k];
        const Index near = out[i].near[k];
        if (c.count == 0 && near == 0) continue;
        const Transfer t{s, -1, c.region, volume(c.region) * es_};
        const Movement m = movement(c.region, a[s], c.other, rules);
        if (near > 0) ranks[s].send(t, m, LinkClass::kIntraNode, near);
        if (c.count > 0) ranks[s].send(t, m, LinkClass::kInterNode, c.count);
      }
    }
  }
  return true;
}

ExchangeRules StepPricer::exchange_rules(Transport transport, bool reduces) const {
  return ExchangeRules{transport,      es_, chunk_bytes_, reduces, model_.profile().nvlink.copy_engine_min_row_bytes,
                       model_.low_sm()};
}

PricedStep price_listed_p2p(const StepPricer& pricer, const RankBoxes& a, const RankBoxes& b,
                            const std::vector<Transfer>& all, Transport transport, bool reduces, bool mixed) {
  const CostModel& model = pricer.model();
  const int n = a.size();
  PricedStep ps = StepPricer::p2p_step(a, b, transport);
  const ExchangeRules rules = pricer.exchange_rules(transport, reduces);
  const ExchangeRules near = pricer.exchange_rules(Transport::kNvlink, reduces);  // mixed: within a node
  const ExchangeRules& forward = mixed ? near : rules;                            // a relayed phase's
  const bool one_sided = transport == Transport::kNvlink;
  const bool relayed = std::any_of(all.begin(), all.end(), [](const Transfer& t) { return t.is_relayed(); });
  std::vector<RankExchange> ranks(n, RankExchange(rules));
  std::vector<RankExchange> inside(mixed ? n : 0, RankExchange(near));
  std::vector<RankExchange> relays(relayed ? n : 0, RankExchange(forward));
  Index inside_bytes = 0, relayed_bytes = 0;
  for (const Transfer& t : all) {
    if (t.is_local()) {
      (mixed ? inside : ranks)[t.dst].local(t, a[t.dst], b[t.dst]);
      continue;
    }
    const LinkClass link = model.topology().link(t.sender(), t.dst);
    if (one_sided && link != LinkClass::kIntraNode) {
      ps.unavailable = StepPricer::cross_node_reason(t);
      return ps;
    }
    ps.step.bytes_moved += t.bytes;
    if (t.is_relayed()) {
      const Movement m = movement(t.region, b[t.via], b[t.dst], forward);
      relays[t.via].send(t, m, link);
      relays[t.dst].receive(t, m, link);
      relayed_bytes += t.bytes;
      continue;
    }
    const bool near_pair = mixed && link == LinkClass::kIntraNode;
    const Movement m = movement(t.region, a[t.src], b[t.dst], near_pair ? near : rules);
    std::vector<RankExchange>& side = near_pair ? inside : ranks;
    side[t.src].send(t, m, link);
    side[t.dst].receive(t, m, link);
    if (near_pair) inside_bytes += t.bytes;
  }
  pricer.finish_p2p(ranks, rules, ps);
  // One-sided parts of a mixed step are never fused.
  const StepPricer separate(model, pricer.dtype(), pricer.chunk_bytes(), Fusion::kNever, pricer.reference());
  if (mixed) {
    PricedStep part = StepPricer::p2p_step(a, b, Transport::kNvlink);
    part.step.bytes_moved = inside_bytes;
    separate.finish_p2p(inside, near, part);
    ps.step.estimated_us = std::max(ps.step.estimated_us, part.step.estimated_us);
    ps.peer_reads = part.peer_reads;
    ps.step.mixed = true;
  }
  if (relayed) {
    PricedStep second = StepPricer::p2p_step(b, b, mixed ? Transport::kNvlink : transport);
    second.step.bytes_moved = relayed_bytes;
    (mixed ? separate : pricer).finish_p2p(relays, forward, second);
    ps.step.estimated_us += second.step.estimated_us;
    ps.step.relayed = true;
    if (mixed) ps.peer_reads += second.peer_reads;
    for (int r = 0; r < n; ++r) ps.scratch[r] = std::max(ps.scratch[r], second.scratch[r]);
  }
  return ps;
}

}  // namespace reshard::detail
