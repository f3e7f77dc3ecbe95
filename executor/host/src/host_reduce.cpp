// Reductions on the host backend (Device::prepare_reductions).
#include <cstring>

#include "reshard/detail/half.hpp"
#include "reshard/detail/reduce_math.hpp"
#include "reshard/host_backend.hpp"

namespace reshard {
namespace {

// Loads and stores elements of one dtype through its accumulator type.
template <class T, class Acc>
struct Plain {
  using acc = Acc;
  static Acc load(const std::byte* p) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return static_cast<Acc>(v);
  }
  static void store(std::byte* p, Acc a) {
    T v = static_cast<T>(a);
    std::memcpy(p, &v, sizeof(T));
  }
};

template <float (*ToFloat)(std::uint16_t), std::uint16_t (*FromFloat)(float)>
struct Half {
  using acc = float;
  static float load(const std::byte* p) {
    std::uint16_t h;
    std::memcpy(&h, p, 2);
    return ToFloat(h);
  }
  static void store(std::byte* p, float a) {
    std::uint16_t h = FromFloat(a);
    std::memcpy(p, &h, 2);
  }
};

class HostReduceBatch : public CopyBatch {
 public:
  HostReduceBatch(std::vector<ReduceRegion> regions, DType dtype) : regions_(std::move(regions)), dtype_(dtype) {}
  void run(const BufferBases& b, StreamHandle) override {
    for (const ReduceRegion& r : regions_) {
      switch (dtype_) {
        case DType::kF64:
          reduce<Plain<double, double>>(b, r, 8);
          break;
        case DType::kF32:
          reduce<Plain<float, float>>(b, r, 4);
          break;
        case DType::kF16:
          reduce<Half<detail::f16_to_float, detail::float_to_f16>>(b, r, 2);
          break;
        case DType::kBF16:
          reduce<Half<detail::bf16_to_float, detail::float_to_bf16>>(b, r, 2);
          break;
        case DType::kI64:
          reduce<Plain<std::int64_t, std::int64_t>>(b, r, 8);
          break;
        case DType::kI32:
          reduce<Plain<std::int32_t, std::int64_t>>(b, r, 4);
          break;
        case DType::kI8:
          reduce<Plain<std::int8_t, std::int64_t>>(b, r, 1);
          break;
        case DType::kU8:
          reduce<Plain<std::uint8_t, std::int64_t>>(b, r, 1);
          break;
      }
    }
  }

 private:
  template <class E>
  void reduce(const BufferBases& b, const ReduceRegion& r, int es) const {
    using Acc = typename E::acc;
    const int nd = r.shape.size();
    const size_t m = r.srcs.size();
    std::vector<const std::byte*> srcs(m);
    for (size_t j = 0; j < m; ++j) srcs[j] = static_cast<const std::byte*>(address_of(b, r.srcs[j], es));
    auto* dst = static_cast<std::byte*>(const_cast<void*>(address_of(b, r.dst, es)));
    const Index n = r.shape.product();
    Dims idx(nd, 0);
    for (Index i = 0; i < n; ++i) {
      Index dof = 0;
      for (int d = 0; d < nd; ++d) dof += idx[d] * r.dst_strides[d];
      Acc acc = Acc(0);
      for (size_t j = 0; j < m; ++j) {
        Index so = 0;
        for (int d = 0; d < nd; ++d) so += idx[d] * r.src_strides[j][d];
        Acc v = E::load(srcs[j] + so * es);
        acc = j == 0 ? v : detail::combine(acc, v, static_cast<int>(r.op));
      }
      E::store(dst + dof * es, m == 0 ? Acc(0) : detail::finish(acc, r.divisor));
      for (int d = nd - 1; d >= 0; --d) {
        if (++idx[d] < r.shape[d]) break;
        idx[d] = 0;
      }
    }
  }

  std::vector<ReduceRegion> regions_;
  DType dtype_;
};

}  // namespace

std::unique_ptr<CopyBatch> HostDevice::prepare_reductions(const std::vector<ReduceRegion>& regions, DType dtype) {
  return std::make_unique<HostReduceBatch>(regions, dtype);
}

}  // namespace reshard
