// The price of converting the dtype in the move (PlanSpec::to_dtype; internal to the planner).
//
// Where: on the receiver, always. Every step moves source-dtype elements and the writes into the target tensor
// convert (the copies and unpacks of the last step, its reductions, the one-sided copies). This keeps a Partial
// source reduced in its own dtype before the single conversion (the value PyTorch's full_tensor().to(dtype) gives),
// and keeps one dtype per workspace. The wire therefore carries source-dtype bytes, also for narrower targets (bf16 ->
// fp8 moves twice the bytes that converting on the sender would; docs/design.md).
// Price: the receiver's extra pass, one local copy over the busiest rank's target tensor at the wider of the two
// element sizes (the staging of receives that would land in place, or the converting copies' wider reads or writes).
// The term depends on the target layout only, so it is the same for every candidate and leaves their ranking alone.
#pragma once

#include "reshard/cost_model.hpp"
#include "reshard/plan.hpp"

namespace reshard::detail {

// 0 when `to_dtype` equals `dtype`.
double conversion_us(const CostModel& model, const Layout& dst, DType dtype, DType to_dtype);

// The receiver stages what would land in its target in place: estimated as its whole target tensor in source elements
// (the lowering takes what the last step needs: its receives, or a collective's receive area, which an uneven
// all_gather pads to its largest member's chunk).
Index conversion_staging_bytes(const Layout& dst, DType dtype);

// Adds conversion_us to a planned spec (spec.to_dtype set): its estimate, its last step's and every available
// candidate's; and to its and their peak workspace the staging.
void price_conversion(PlanSpec& spec, const CostModel& model);

}  // namespace reshard::detail
