// Shared by the fuzz targets: only reshard::Error may escape a parser or the planner, and never of kind kInternal (a
// broken invariant); anything else (another exception, a crash, a sanitizer report) is a finding.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "reshard/error.hpp"

namespace reshard::fuzz {

template <class F>
bool only_reshard_errors(F f) {
  try {
    f();
    return true;
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kInternal) {
      std::fprintf(stderr, "internal error: %s\n", e.what());
      std::abort();
    }
    return false;  // a clear, expected refusal
  } catch (const std::exception& e) {
    std::fprintf(stderr, "unexpected exception: %s\n", e.what());
    std::abort();
  }
}

// A document loader's round trip: loads `text`; what loads must dump to text that loads and dumps back to the same
// text. Returns what `text` loaded as.
template <class Load, class Dump>
auto round_trip(const std::string& text, Load load, Dump dump) {
  auto loaded = load(text);
  const std::string dumped = dump(loaded);
  if (dump(load(dumped)) != dumped) std::abort();
  return loaded;
}

// Reads the input as a byte stream.
class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  int next(int lo, int hi) {  // in [lo, hi]
    int v = pos_ < size_ ? data_[pos_++] : 0;
    return lo + v % (hi - lo + 1);
  }
  bool empty() const { return pos_ >= size_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace reshard::fuzz
