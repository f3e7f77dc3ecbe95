// Links the installed reshard package and computes a layout.
#include <iostream>

#include "reshard/layout.hpp"

int main() {
  reshard::Layout layout(reshard::Mesh({2, 2}), reshard::parse_placements("S0,S1"), reshard::parse_shape("4x6"));
  reshard::Box b = layout.box(3);
  std::cout << "rank 3 holds " << reshard::to_string(b) << "\n";
  return reshard::to_string(b) == "[2:4, 3:6]" ? 0 : 1;
}
