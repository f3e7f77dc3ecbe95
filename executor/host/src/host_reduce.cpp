// The host backend's reduction (reshard/host_reduce.hpp) and HostDevice::prepare_reductions on top of it.
#include "reshard/host_reduce.hpp"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "reshard/detail/half.hpp"
#include "reshard/detail/reduce_math.hpp"
#include "reshard/dtype_convert.hpp"
#include "reshard/host_backend.hpp"

namespace reshard {
namespace {

// Loads and stores one element of type T through its accumulator.
template <class T>
struct HostElement {
  using Acc = typename detail::Accumulator<T>::type;
  static Acc load(const std::byte* p) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    if constexpr (std::is_same_v<T, Float16>) {
      return detail::f16_to_float(v.bits);
    } else if constexpr (std::is_same_v<T, BFloat16>) {
      return detail::bf16_to_float(v.bits);
    } else {
      return static_cast<Acc>(v);
    }
  }
  static void store(std::byte* p, Acc a) {
    T v;
    if constexpr (std::is_same_v<T, Float16>) {
      v.bits = detail::float_to_f16(a);
    } else if constexpr (std::is_same_v<T, BFloat16>) {
      v.bits = detail::float_to_bf16(a);
    } else {
      v = static_cast<T>(a);
    }
    std::memcpy(p, &v, sizeof(T));
  }
};

// The strided loop over the elements of `shape`, each `lanes` consecutive values of T (complex64: two floats).
template <class T>
void reduce_typed(std::byte* dst, const Dims& dst_strides, std::span<const HostReduceOperand> srcs, const Dims& shape,
                  int lanes, ReduceOp op, Index divisor) {
  using E = HostElement<T>;
  using Acc = typename E::Acc;
  const int nd = shape.size();
  const Index n = shape.product();
  if (n == 0) return;
  const Index row = nd ? shape[nd - 1] : 1;
  const Index dst_step = (nd ? dst_strides[nd - 1] : 0) * lanes;
  Dims idx(nd, 0);
  for (Index done = 0; done < n; done += row) {
    Index dof = 0;
    for (int d = 0; d + 1 < nd; ++d) dof += idx[d] * dst_strides[d];
    std::byte* out = dst + dof * lanes * static_cast<Index>(sizeof(T));
    for (Index c = 0; c < row; ++c) {
      for (int lane = 0; lane < lanes; ++lane) {
        Acc acc = Acc(0);
        for (size_t j = 0; j < srcs.size(); ++j) {
          const Dims& st = srcs[j].strides;
          Index so = nd ? c * st[nd - 1] : 0;
          for (int d = 0; d + 1 < nd; ++d) so += idx[d] * st[d];
          const auto* in = static_cast<const std::byte*>(srcs[j].data) + (so * lanes + lane) * sizeof(T);
          Acc v = E::load(in);
          acc = j == 0 ? v : detail::combine(acc, v, op);
        }
        E::store(out + (c * dst_step + lane) * static_cast<Index>(sizeof(T)),
                 srcs.empty() ? Acc(0) : detail::finish(acc, divisor));
      }
    }
    for (int d = nd - 2; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

// Writes `shape` elements of `from`, dense row-major at `src`, into `dst` (strides in its elements) as `to`.
void convert_box(const std::byte* src, DType from, std::byte* dst, const Dims& dst_strides, DType to,
                 const Dims& shape) {
  const int nd = shape.size();
  const Index row = nd ? shape[nd - 1] : 1;
  const Index rows = row > 0 ? shape.product() / row : 0;
  const int fes = element_size(from), tes = element_size(to);
  Dims idx(nd, 0);
  for (Index i = 0; i < rows; ++i) {
    Index dof = 0;
    for (int d = 0; d + 1 < nd; ++d) dof += idx[d] * dst_strides[d];
    convert_elements(src + i * row * fes, from, dst + dof * tes, to, row);
    for (int d = nd - 2; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

// Reduces in `dtype`; with a conversion (output_dtype != dtype), a region written into an output buffer is reduced
// into a dense scratch box of `dtype` (rounded to it), then stored converted.
class HostReduceBatch : public CopyBatch {
 public:
  HostReduceBatch(std::vector<ReduceRegion> regions, DType dtype, DType output_dtype)
      : regions_(std::move(regions)), dtype_(dtype), output_dtype_(output_dtype) {
    Index most = 0;
    for (const ReduceRegion& r : regions_) {
      require_reducible(dtype_, r.op);
      RESHARD_REQUIRE(r.srcs.size() == r.src_strides.size(), "reduction region: ", r.srcs.size(), " sources but ",
                      r.src_strides.size(), " stride sets");
      if (converts(r)) most = std::max(most, r.shape.product());
    }
    scratch_.resize(static_cast<size_t>(most) * static_cast<size_t>(element_size(dtype_)));
  }
  void run(const BufferBases& b, StreamHandle) override {
    const int es = element_size(dtype_);
    std::vector<HostReduceOperand> srcs;
    for (const ReduceRegion& r : regions_) {
      srcs.clear();
      for (size_t j = 0; j < r.srcs.size(); ++j)
        srcs.push_back({static_cast<const std::byte*>(address_of(b, r.srcs[j], es)), r.src_strides[j]});
      auto* dst = static_cast<std::byte*>(const_cast<void*>(address_of(b, r.dst, es)));
      if (!converts(r)) {
        host_reduce(dst, r.dst_strides, srcs, r.shape, dtype_, r.op, r.divisor);
        continue;
      }
      const int nd = r.shape.size();
      Dims dense(nd, 1);
      for (int d = nd - 2; d >= 0; --d) dense[d] = dense[d + 1] * r.shape[d + 1];
      host_reduce(scratch_.data(), dense, srcs, r.shape, dtype_, r.op, r.divisor);
      convert_box(scratch_.data(), dtype_, dst, r.dst_strides, output_dtype_, r.shape);
    }
  }

 private:
  bool converts(const ReduceRegion& r) const { return output_dtype_ != dtype_ && r.dst.buffer == Buffer::kOutput; }
  std::vector<ReduceRegion> regions_;
  DType dtype_, output_dtype_;
  std::vector<std::byte> scratch_;
};

}  // namespace

void host_reduce(void* dst, const Dims& dst_strides, std::span<const HostReduceOperand> srcs, const Dims& shape,
                 DType dtype, ReduceOp op, Index divisor) {
  require_reducible(dtype, op);
  const detail::ReduceAs as = detail::reduce_as(dtype);
  visit_dtype(as.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_void_v<typename detail::Accumulator<T>::type>) {
      fail(ErrorKind::kInternal, cat("no host reduction for ", to_string(dtype)));
    } else {
      reduce_typed<T>(static_cast<std::byte*>(dst), dst_strides, srcs, shape, as.lanes, op, divisor);
    }
  });
}

void host_reduce(void* dst, std::span<const void* const> srcs, size_t count, DType dtype, ReduceOp op, Index divisor) {
  std::vector<HostReduceOperand> operands;
  for (const void* s : srcs) operands.push_back({s, Dims{1}});
  host_reduce(dst, Dims{1}, operands, Dims{static_cast<Index>(count)}, dtype, op, divisor);
}

void host_reduce(void* dst, const void* src, size_t count, DType dtype, ReduceOp op) {
  const void* srcs[] = {dst, src};
  host_reduce(dst, std::span<const void* const>(srcs), count, dtype, op, 1);
}

std::unique_ptr<CopyBatch> HostDevice::prepare_reductions(const std::vector<ReduceRegion>& regions, DType dtype) {
  return std::make_unique<HostReduceBatch>(regions, dtype, dtype);
}

std::unique_ptr<CopyBatch> HostDevice::prepare_reductions(const std::vector<ReduceRegion>& regions, DType dtype,
                                                          DType output_dtype) {
  if (dtype != output_dtype) require_convertible(dtype, output_dtype);
  return std::make_unique<HostReduceBatch>(regions, dtype, output_dtype);
}

}  // namespace reshard
