// Dims: a small fixed-capacity vector of 64-bit integers (shapes, offsets, strides, coordinates).
//
// Tensors and meshes have at most kMaxDims dimensions. Dims never allocates, so boxes and layouts can be
// built in inner loops of the planner.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "reshard/checked_math.hpp"
#include "reshard/error.hpp"

namespace reshard {

inline constexpr int kMaxDims = 8;

class Dims {
 public:
  Dims() = default;
  explicit Dims(int n, Index fill = 0) : n_(check_size(n)) {
    for (int i = 0; i < n_; ++i) v_[i] = fill;
  }
  Dims(std::initializer_list<Index> values) : n_(check_size(static_cast<int>(values.size()))) {
    int i = 0;
    for (Index x : values) v_[i++] = x;
  }
  template <class T>
  static Dims from(std::span<const T> values) {
    Dims d(static_cast<int>(values.size()));
    for (int i = 0; i < d.n_; ++i) d.v_[i] = static_cast<Index>(values[i]);
    return d;
  }
  template <class T>
  static Dims from(const std::vector<T>& values) {
    return from(std::span<const T>(values));
  }

  int size() const { return n_; }
  bool empty() const { return n_ == 0; }
  Index& operator[](int i) { return v_[i]; }
  Index operator[](int i) const { return v_[i]; }
  Index* begin() { return v_.data(); }
  Index* end() { return v_.data() + n_; }
  const Index* begin() const { return v_.data(); }
  const Index* end() const { return v_.data() + n_; }
  std::span<const Index> span() const { return {v_.data(), static_cast<size_t>(n_)}; }
  std::vector<Index> vec() const { return {begin(), end()}; }

  void push_back(Index x) {
    check_size(n_ + 1);
    v_[n_++] = x;
  }

  // Product of all entries (1 for an empty Dims); overflow is an error naming `what`.
  Index product(std::string_view what = "product of dims") const {
    Index p = 1;
    for (int i = 0; i < n_; ++i) p = checked_mul(p, v_[i], what);
    return p;
  }

  friend bool operator==(const Dims& a, const Dims& b) {
    if (a.n_ != b.n_) return false;
    for (int i = 0; i < a.n_; ++i)
      if (a.v_[i] != b.v_[i]) return false;
    return true;
  }

 private:
  static int check_size(int n) {
    if (n < 0 || n > kMaxDims)
      fail(ErrorKind::kInvalidArgument, cat("at most ", kMaxDims, " dims are supported, got ", n));
    return n;
  }
  std::array<Index, kMaxDims> v_{};
  int n_ = 0;
};

// "7x5" for {7, 5}; "" for an empty Dims (a scalar).
std::string to_string(const Dims& d, char sep = 'x');
// "[7, 5]"
std::string to_list_string(const Dims& d);
// "0,2" for {0, 2}
std::string join(const std::vector<int>& values, char sep = ',');

// Row-major (C order) strides of a dense tensor of this shape, in elements.
Dims row_major_strides(const Dims& shape);

}  // namespace reshard
