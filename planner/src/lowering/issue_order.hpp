// The order of a one-sided step's peer copies (internal to the planner's lowering).
#pragma once

#include <cstddef>
#include <vector>

#include "reshard/plan.hpp"

namespace reshard::detail {

// The order in which a rank issues its peer copies (pushing: the copies it sends; pulling: those it receives).
// Copies on one stream run one after the other and no rank waits for another between them, so the k-th copies of
// all ranks run at about the same time; where two of them have the same other end (the same receiver when pushing,
// the same sender when pulling) they share its link. So every rank computes, from the step's transfers, one order
// for all issuers, position by position: a maximum matching of the issuers that have copies left to their copies'
// other ends (augmenting paths; the issuers with the most copies left first, each trying the other ends with the most
// copies left first, then in staggered order: distance (dst - src) mod world), each matched issuer taking its first
// copy left to its match, an unmatched one its first copy left. Where every rank talks to every other this gives the
// staggered permutations r -> r+1, r+2, ... (as NCCL's all-to-all orders its peers); where only some pairs talk (2x2
// [S0,S0] -> [S1,S0]) it keeps, where it can, two copies from landing on one rank at once, which distance order alone
// does not. Copies between the same two ranks keep their order.
// `transfers`: what the plan holds of the step (a plan scoped to one rank holds that rank's only). Returns the
// indices into `transfers` of `rank`'s copies in issue order.
std::vector<size_t> issue_order(const std::vector<Transfer>& transfers, int rank, int world, bool push);

}  // namespace reshard::detail
