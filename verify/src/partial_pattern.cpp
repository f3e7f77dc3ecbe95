// The test pattern on Partial layouts: contributions that reduce to the pattern, and the expected target values.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "box_walk.hpp"
#include "reshard/detail/half.hpp"
#include "reshard/detail/pattern_bits.hpp"
#include "reshard/partial.hpp"
#include "reshard/pattern.hpp"
#include "reshard/plan.hpp"

namespace reshard {
namespace {

// The Partial mesh dims (size > 1) of canonical placements, and their one reduce op.
struct PartialDims {
  std::vector<int> dims;
  ReduceOp op = ReduceOp::kSum;
  Index count = 1;  // contributions: the product of the dims' sizes
};

PartialDims partial_dims(const Mesh& mesh, const std::vector<Placement>& ps, const char* which) {
  PartialDims p;
  for (int k = 0; k < mesh.ndim(); ++k) {
    if (!ps[k].is_partial() || mesh.dim_size(k) == 1) continue;
    RESHARD_REQUIRE(p.dims.empty() || ps[k].op() == p.op, "the test pattern needs one reduce op per layout; the ",
                    which, " [", to_string(ps), "] mixes them");
    p.dims.push_back(k);
    p.op = ps[k].op();
    p.count *= mesh.dim_size(k);
  }
  return p;
}

// Row-major index of coord over dims.
Index index_over(const Mesh& mesh, const std::vector<int>& dims, const Dims& coord) {
  Index q = 0;
  for (int k : dims) q = q * mesh.dim_size(k) + coord[k];
  return q;
}

bool narrow_int(DType t) { return t == DType::kI8 || t == DType::kU8; }
double lowest(DType t) { return t == DType::kI8 ? -128 : t == DType::kU8 ? 0 : -1e300; }
double highest(DType t) { return t == DType::kI8 ? 127 : t == DType::kU8 ? 255 : 1e300; }

double offset_of(Index i, Index q) { return static_cast<double>((i + q) % 3) - 1; }

// Contribution q of Q for element i with value v (exact small integers; see pattern.hpp).
double contribution(double v, Index i, Index q, Index count, ReduceOp op, DType t) {
  auto in_range = [&](double x) { return x >= lowest(t) && x <= highest(t); };
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: {
      if (op == ReduceOp::kAvg && narrow_int(t)) return v;
      const double base = op == ReduceOp::kSum ? 0 : v;
      if (q > 0) return base + offset_of(i, q);
      double others = 0;
      for (Index j = 1; j < count; ++j) others += offset_of(i, j);
      return v - others;  // 8-bit sums wrap; the wrapped contributions still add up to v
    }
    case ReduceOp::kMax:
      return q > 0 && in_range(v - std::abs(offset_of(i, q))) ? v - std::abs(offset_of(i, q)) : v;
    case ReduceOp::kMin:
      return q > 0 && in_range(v + std::abs(offset_of(i, q))) ? v + std::abs(offset_of(i, q)) : v;
  }
  return v;
}

// The dtype of one lane of an element: complex64 holds two f32 (pattern_lanes), others one value of their own type.
DType lane_dtype(DType t) { return t == DType::kC64 ? DType::kF32 : t; }

// Stores x as one lane of dtype t (a lane dtype): floats round, integers wrap to the element's low bytes.
void store(unsigned char* p, double x, DType t) {
  visit_dtype(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
      const std::uint16_t h = std::is_same_v<T, Float16> ? detail::float_to_f16(static_cast<float>(x))
                                                         : detail::float_to_bf16(static_cast<float>(x));
      std::memcpy(p, &h, 2);
    } else if constexpr (std::is_floating_point_v<T>) {
      const T v = static_cast<T>(x);
      std::memcpy(p, &v, sizeof(T));
    } else if constexpr (std::is_integral_v<T>) {
      const auto v = static_cast<std::int64_t>(x);  // two's complement: the low bytes wrap to the element type
      std::memcpy(p, &v, sizeof(T));
    } else {
      fail(ErrorKind::kInternal, cat("the Partial test pattern has no values of ", to_string(t)));
    }
  });
}

// Loads one lane of a floating dtype t as its value.
double load_float(const unsigned char* p, DType t) {
  return visit_dtype(t, [&](auto tag) -> double {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
      std::uint16_t h;
      std::memcpy(&h, p, 2);
      return std::is_same_v<T, Float16> ? detail::f16_to_float(h) : detail::bf16_to_float(h);
    } else if constexpr (std::is_floating_point_v<T>) {
      T v;
      std::memcpy(&v, p, sizeof(T));
      return v;
    } else {
      fail(ErrorKind::kInternal, cat(to_string(t), " is not a floating lane type"));
    }
  });
}

std::uint64_t int_bits(double x, DType t) {
  auto v = static_cast<std::int64_t>(x);
  std::uint64_t bits = static_cast<std::uint64_t>(v);
  const int es = element_size(t);
  return es == 8 ? bits : bits & ((std::uint64_t(1) << (8 * es)) - 1);
}

}  // namespace

double partial_tolerance(DType dtype, double want, Index contributions) {
  const int mantissa_bits = visit_dtype(lane_dtype(dtype), [](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, double>) return 52;
    if constexpr (std::is_same_v<T, float>) return 23;
    if constexpr (std::is_same_v<T, Float16>) return 10;
    if constexpr (std::is_same_v<T, BFloat16>) return 7;
    return 0;  // exact types
  });
  if (mantissa_bits == 0) return 0;
  const double rtol = std::ldexp(1.0, -(mantissa_bits - 2));
  const double q = static_cast<double>(std::max<Index>(1, contributions));
  return rtol * q * (std::abs(want) + q);
}

void fill_local(void* data, const Layout& layout, int rank, DType dtype) {
  const Mesh& mesh = layout.mesh();
  const PartialDims p = partial_dims(mesh, canonical_placements(mesh, layout.placements()), "layout");
  const Box box = layout.box(rank);
  if (p.dims.empty()) return fill_pattern(data, box, layout.global_shape(), dtype);
  require_reducible(dtype, p.op);
  const Index q = index_over(mesh, p.dims, mesh.coord_of(rank));
  const int es = element_size(dtype), lanes = detail::pattern_lanes(dtype);
  const DType lt = lane_dtype(dtype);
  auto* out = static_cast<unsigned char*>(data);
  detail::for_each_element(box, layout.global_shape(), [&](Index local, Index g) {
    for (int lane = 0; lane < lanes; ++lane) {
      const double v = static_cast<double>(detail::pattern_int(g, dtype, lane));
      store(out + local * es + lane * (es / lanes), contribution(v, g * lanes + lane, q, p.count, p.op, lt), lt);
    }
  });
}

Index count_local_mismatches(const void* data, const Layout& src, const Layout& dst, int rank, DType dtype) {
  const Mesh& mesh = src.mesh();
  const std::vector<Placement> from = canonical_placements(mesh, src.placements()),
                               to = canonical_placements(mesh, dst.placements());
  const PartialDims sp = partial_dims(mesh, from, "source"), dp = partial_dims(mesh, to, "target");
  const Box box = dst.box(rank);
  if (sp.dims.empty() && dp.dims.empty()) return count_mismatches(data, box, dst.global_shape(), dtype);
  const PartialRoles roles = partial_roles(mesh, from, to);
  const Dims coord = mesh.coord_of(rank);
  const Partition part = partition_for(mesh, to, roles.created, dtype, coord);
  // Contributions that rank's value on kept dims reduces: its coordinates on the kept dims, every coordinate of
  // the reduced ones.
  std::vector<Index> qs;
  if (!roles.kept.empty()) {
    for (Index r = 0; r < roles.contributions; ++r) {
      Dims c = coord;
      Index rest = r;
      for (int j = static_cast<int>(roles.reduced.size()) - 1; j >= 0; --j) {
        const int k = roles.reduced[j];
        c[k] = rest % mesh.dim_size(k);
        rest /= mesh.dim_size(k);
      }
      qs.push_back(index_over(mesh, sp.dims, c));
    }
  }
  const int es = element_size(dtype), lanes = detail::pattern_lanes(dtype), ls = es / lanes;
  const DType lt = lane_dtype(dtype);
  const auto* in = static_cast<const unsigned char*>(data);
  Index wrong = 0;
  detail::for_each_element(box, dst.global_shape(), [&](Index local, Index g) {
    bool ok = true;
    for (int lane = 0; lane < lanes; ++lane) {
      const double v = static_cast<double>(detail::pattern_int(g, dtype, lane));
      const Index i = g * lanes + lane;
      double want = v;
      if (!qs.empty()) {
        for (size_t j = 0; j < qs.size(); ++j) {
          double c = contribution(v, i, qs[j], sp.count, sp.op, lt);
          want = j == 0                    ? c
                 : sp.op == ReduceOp::kMax ? std::max(want, c)
                 : sp.op == ReduceOp::kMin ? std::min(want, c)
                                           : want + c;
        }
        if (sp.op == ReduceOp::kAvg) want /= static_cast<double>(qs.size());
        if (!is_floating(lt)) want = std::trunc(want);
      }
      if (part.zero) want = 0;
      if (part.divisor > 1) want /= static_cast<double>(part.divisor);
      const unsigned char* at = in + local * es + lane * ls;
      if (is_floating(lt)) {
        const double got = load_float(at, lt);
        ok = ok && std::abs(got - want) <= partial_tolerance(lt, want, sp.count);
      } else {
        std::uint64_t got = 0;
        std::memcpy(&got, at, ls);
        ok = ok && got == int_bits(want, lt);
      }
    }
    wrong += !ok;
  });
  return wrong;
}

}  // namespace reshard
