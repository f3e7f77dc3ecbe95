#include "search/hybrid.hpp"

#include <algorithm>
#include <unordered_map>

#include "plan/transitions.hpp"
#include "reshard/partial.hpp"
#include "search/relayed_step.hpp"

namespace reshard::detail {
namespace {

enum class Role { kPre, kPost, kP2P };

constexpr int kMaxEnumeratedDims = 5;  // 3^5 role assignments, each with its orders: ample for real meshes

class HybridSearch {
 public:
  HybridSearch(const Layout& src, const Layout& dst, const StepPricer& pricer, Transport transport, LayoutCache& cache,
               double above)
      : src_(src), dst_(dst), pricer_(pricer), transport_(transport), cache_(cache), above_(above) {
    for (int k = 0; k < src.mesh().ndim(); ++k)
      if (!(src.placement(k) == dst.placement(k))) changing_.push_back(k);
  }

  std::optional<Route> run(std::string* reason) {
    const int n = static_cast<int>(changing_.size());
    if (n < 2) {
      if (reason) *reason = "needs at least two mesh dims whose placement changes";
      return std::nullopt;
    }
    if (n > kMaxEnumeratedDims) {
      if (reason) *reason = cat("more than ", kMaxEnumeratedDims, " mesh dims change; hybrid enumeration skipped");
      return std::nullopt;
    }
    std::vector<Role> roles(n, Role::kPre);
    int total = 1;
    for (int i = 0; i < n; ++i) total *= 3;
    for (int code = 0; code < total; ++code) {
      int c = code;
      bool has_p2p = false, has_coll = false, ok = true;
      std::optional<ReduceOp> p2p_op;
      for (int i = 0; i < n; ++i, c /= 3) {
        roles[i] = static_cast<Role>(c % 3);
        int k = changing_[i];
        has_p2p = has_p2p || roles[i] == Role::kP2P;
        has_coll = has_coll || roles[i] != Role::kP2P;
        if (roles[i] == Role::kPost && !(dst_.placement(k).is_replicate() && !src_.placement(k).is_replicate()))
          ok = false;
        // The p2p step reduces the Partial dims it takes over (one reduce op), and never creates one.
        if (roles[i] == Role::kP2P && src_.placement(k).is_partial()) {
          if (p2p_op && *p2p_op != src_.placement(k).op()) ok = false;
          p2p_op = src_.placement(k).op();
        }
        if (roles[i] == Role::kP2P && dst_.placement(k).is_partial()) ok = false;
      }
      if (ok && has_p2p && has_coll) try_roles(roles);
    }
    // Routes were left out above the bound: the best one found is the best of all only if it lies within it (those left
    // out cost more).
    if (skipped_above_ && (!best_ || !(best_->us <= above_))) {
      costlier_ = true;
      return std::nullopt;
    }
    if (!best_ && reason)
      *reason = unavailable_.empty() ? "no valid combination of collectives and one p2p step" : unavailable_;
    return best_;
  }

  // Whether run() returned nullopt because no route costs at most the bound.
  bool costlier() const { return costlier_; }

 private:
  void try_roles(const std::vector<Role>& roles) {
    std::vector<int> pre, post;
    for (size_t i = 0; i < roles.size(); ++i) {
      if (roles[i] == Role::kPre) pre.push_back(changing_[i]);
      if (roles[i] == Role::kPost) post.push_back(changing_[i]);
    }
    // Post dims leave the p2p step as Shard(d) for some d; try each d per post dim.
    int nd = src_.ndim();
    if (!post.empty() && nd == 0) return;
    int shard_choices = 1;
    for (size_t i = 0; i < post.size(); ++i) shard_choices *= nd;
    std::sort(pre.begin(), pre.end());
    do {
      std::vector<PricedStep> pre_steps;
      double pre_us = 0;
      std::vector<Placement> x = src_.placements();
      bool valid = true;
      for (int k : pre) {
        std::vector<Placement> y = x;
        y[k] = dst_.placement(k);
        if (!append(x, y, {k}, pre_steps, pre_us)) {
          valid = false;
          break;
        }
        x = y;
      }
      if (!valid || (best_ && pre_us >= best_->us)) continue;
      if (pre_us > above_) {  // every route through these steps costs more than the bound (none is priced)
        skipped_above_ = true;
        continue;
      }
      for (int choice = 0; choice < shard_choices; ++choice) {
        std::vector<Placement> y = dst_.placements();
        int c = choice;
        for (int k : post) {
          y[k] = Placement::shard(c % nd);
          c /= nd;
        }
        try_middle(x, y, post, pre_steps, pre_us);
      }
    } while (std::next_permutation(pre.begin(), pre.end()));
  }

  void try_middle(const std::vector<Placement>& x, const std::vector<Placement>& y, std::vector<int> post,
                  const std::vector<PricedStep>& pre_steps, double pre_us) {
    if (x == y || !boxed(x) || !boxed(y)) return;
    if (!reduction_exact(src_.mesh(), x, y, dst_.placements(), pricer_.dtype(), false)) return;
    const PricedStep* p2p = p2p_step(x, y);
    if (!p2p->unavailable.empty()) {
      unavailable_ = p2p->unavailable;
      return;
    }
    std::sort(post.begin(), post.end());
    do {
      std::vector<PricedStep> steps = pre_steps;
      double us = pre_us;
      steps.push_back(*p2p);
      us += p2p->step.estimated_us;
      if (best_ && us >= best_->us) break;  // post steps only add to it
      if (us > above_) {
        skipped_above_ = true;
        break;
      }
      std::vector<Placement> cur = y;
      bool valid = true;
      for (int k : post) {
        std::vector<Placement> next = cur;
        next[k] = Placement::replicate();
        if (!append(cur, next, {k}, steps, us)) {
          valid = false;
          break;
        }
        cur = next;
      }
      if (valid && (!best_ || us < best_->us)) best_ = Route{std::move(steps), us};  // rebuilt next iteration
    } while (std::next_permutation(post.begin(), post.end()));
  }

  // Appends the single-collective step from -> to on dims when it is valid; false otherwise.
  bool append(const std::vector<Placement>& from, const std::vector<Placement>& to, const std::vector<int>& dims,
              std::vector<PricedStep>& steps, double& us) {
    std::optional<StepKind> kind = transition_kind(from, to, dims);
    if (!kind || !boxed(to)) return false;
    if (!reduction_exact(src_.mesh(), from, to, dst_.placements(), pricer_.dtype(), true)) return false;
    const std::optional<StepPrice> price = cache_.collective_step(from, to, *kind, dims, pricer_);
    if (!price) return false;
    const StepPrice& p = *price;
    steps.push_back(PricedStep{Step{*kind, dims, from, to, {}, p.us, p.bytes_moved}, {}});
    steps.back().step.hierarchical = p.hierarchical;  // the form the price is for
    steps.back().step.mixed = p.node_one_sided;
    us += p.us;
    return true;
  }

  // Whether the placements put one box on every rank (only _StridedShard ones may not).
  bool boxed(const std::vector<Placement>& ps) const {
    return std::none_of(ps.begin(), ps.end(), [](const Placement& p) { return p.is_strided(); }) ||
           src_.with_placements(ps).one_box_per_rank();
  }

  const RankBoxes& boxes(const std::vector<Placement>& ps) { return cache_.boxes(ps); }

  // The p2p step between two placements, computed once per pair.
  const PricedStep* p2p_step(const std::vector<Placement>& x, const std::vector<Placement>& y) {
    const PlacementsPair key{placements_key(x), placements_key(y)};
    auto it = p2p_cache_.find(key);
    if (it != p2p_cache_.end()) return &it->second;
    return &p2p_cache_.emplace(key, pricer_.p2p(cache_.overlap(x, y), transport_)).first->second;
  }

  const Layout& src_;
  const Layout& dst_;
  const StepPricer& pricer_;
  Transport transport_;
  std::string unavailable_;  // why a p2p step could not run on the transport (when no route was found)
  std::vector<int> changing_;
  LayoutCache& cache_;
  std::unordered_map<PlacementsPair, PricedStep, PlacementsPairHash> p2p_cache_;
  std::optional<Route> best_;
  double above_;                // the caller's bound
  bool skipped_above_ = false;  // routes were left out for costing more than above_
  bool costlier_ = false;       // costlier()
};

}  // namespace

std::optional<Route> best_hybrid_route(const Layout& src, const Layout& dst, const StepPricer& pricer,
                                       Transport transport, const PlanOptions& options, LayoutCache& cache,
                                       std::string* reason, double above, bool* costlier) {
  HybridSearch search(src, dst, pricer, transport, cache, above);
  std::optional<Route> r = search.run(reason);
  if (costlier) *costlier = search.costlier();
  // On nccl across nodes the route's p2p step becomes relayed or mixes transports where that is cheaper, as the p2p
  // strategy's does. Only the chosen route's: pricing the forms for every route searched doubled planning time at
  // (16,8), and the forms only lower the step's price.
  if (r && transport == Transport::kNccl)
    for (PricedStep& p : r->steps) {
      if (p.step.kind != StepKind::kP2P) continue;
      const OverlapIndex& index = cache.overlap(p.step.from, p.step.to);
      if (index.partial_roles().contributions != 1 || !node_aware(index.src(), options) ||
          index.transfer_count(kMaxNodeAwareTransfers) > kMaxNodeAwareTransfers)
        continue;
      const double before = p.step.estimated_us;
      node_aware_step(index.all_transfers(), index.src_boxes(), index.dst_boxes(), pricer, options, p);
      r->us += p.step.estimated_us - before;
    }
  return r;
}

}  // namespace reshard::detail
