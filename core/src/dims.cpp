#include "reshard/dims.hpp"

namespace reshard {

std::string to_string(const Dims& d, char sep) {
  std::string s;
  for (int i = 0; i < d.size(); ++i) {
    if (i) s += sep;
    s += std::to_string(d[i]);
  }
  return s;
}

std::string to_list_string(const Dims& d) {
  std::string s = "[";
  for (int i = 0; i < d.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(d[i]);
  }
  return s + "]";
}

std::string join(const std::vector<int>& values, char sep) {
  std::string s;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) s += sep;
    s += std::to_string(values[i]);
  }
  return s;
}

Dims row_major_strides(const Dims& shape) {
  Dims strides(shape.size(), 1);
  for (int i = shape.size() - 2; i >= 0; --i)
    strides[i] = checked_mul(strides[i + 1], shape[i + 1], "row-major strides");
  return strides;
}

}  // namespace reshard
