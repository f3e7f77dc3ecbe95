// A property of cost-model profiles the planner's bounded searches rely on (internal to the planner).
#pragma once

#include "reshard/profile.hpp"

namespace reshard::detail {

// Whether every time the profile gives is >= 0 (a loaded profile's always are: profile_from_json checks its fields; a
// profile built in code may hold anything). Bounded searches rely on it: a route then costs at least any of its
// prefixes, and a candidate at least its route.
bool times_nonnegative(const Profile& p);

}  // namespace reshard::detail
