// The test pattern on Partial layouts: contributions that reduce to the pattern, and the expected target values.
#include <algorithm>
#include <cmath>
#include <cstdint>
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

// Integers a floating type holds exactly (its significand's range), and the pattern's largest |v| (pattern_bits.hpp).
double exact_range(DType t) {
  switch (t) {
    case DType::kF64:
      return 9007199254740992.0;  // 2^53
    case DType::kF32:
      return 16777216.0;  // 2^24
    case DType::kF16:
      return 2048;
    case DType::kBF16:
      return 256;
    default:
      return 1e300;  // integers: sums wrap, which modular arithmetic makes exact in any order
  }
}
double largest_value(DType t) {
  return t == DType::kF16 ? 1023 : t == DType::kU8 ? 255 : t == DType::kBF16 || t == DType::kI8 ? 127 : 8388607;
}

// A hash of (element, contribution): which rank holds an element's extreme, and the offsets, differ from element
// to element and from rank to rank, so no rank's contribution can go missing unnoticed.
std::uint64_t mix(Index i, Index q) {
  std::uint64_t h =
      static_cast<std::uint64_t>(i) * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(q) * 0xD6E8FEB86659FD93ull;
  h ^= h >> 31;
  h *= 0xBF58476D1CE4E5B9ull;
  return h ^ (h >> 29);
}

// Largest |offset| of sum and avg contributions: 64, or less where every partial sum of Q contributions would leave
// the type's exact range (0: no room, the check degrades as pattern.hpp says).
Index offset_room(DType t, Index count) {
  if (count <= 1) return 0;
  const double room = (exact_range(t) - largest_value(t) - 1) / static_cast<double>(count - 1);
  return static_cast<Index>(std::clamp(room, 0.0, 64.0));
}

// Contribution q of Q for element i with value v (exact small integers; see pattern.hpp).
double contribution(double v, Index i, Index q, Index count, ReduceOp op, DType t) {
  const auto in_range = [&](double x) { return x >= lowest(t) && x <= highest(t); };
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: {
      if (op == ReduceOp::kAvg && narrow_int(t)) {
        // Every partial sum of Q values in [lo, hi] stays in range, so 8-bit sums never wrap: the average of these
        // is what any order of reduction gives.
        const Index span = (t == DType::kI8 ? 127 : 255) / count;
        if (span == 0) return v;  // more contributions than the type has room for
        const Index lo = t == DType::kI8 ? -span : 0, width = t == DType::kI8 ? 2 * span + 1 : span + 1;
        return static_cast<double>(lo + static_cast<Index>(mix(i, q) % static_cast<std::uint64_t>(width)));
      }
      const Index w = offset_room(t, count);
      const auto offset = [&](Index j) {
        return static_cast<double>(static_cast<Index>(mix(i, j) % static_cast<std::uint64_t>(2 * w + 1)) - w);
      };
      const double base = op == ReduceOp::kSum ? 0 : v;
      if (q > 0) return base + offset(q);
      double others = 0;
      for (Index j = 1; j < count; ++j) others += offset(j);
      return v - others;  // 8-bit sums wrap; the wrapped contributions still add up to v
    }
    case ReduceOp::kMax:
    case ReduceOp::kMin: {
      // One rank (chosen per element) holds v, every other one a value strictly beyond it on the losing side.
      if (count <= 1 || q == static_cast<Index>(mix(i, 0) % static_cast<std::uint64_t>(count))) return v;
      const double d = 1 + static_cast<double>(mix(i, q) % 8);
      for (double step : {d, 1.0}) {
        const double x = op == ReduceOp::kMax ? v - step : v + step;
        if (in_range(x) && std::abs(x) < exact_range(t)) return x;
      }
      return v;  // v is the type's extreme: no room
    }
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

double partial_tolerance(DType dtype, double magnitude, Index contributions) {
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
  return rtol * (std::abs(magnitude) + q * q);
}

void fill_local(void* data, const Layout& layout, int rank, DType dtype) {
  const Mesh& mesh = layout.mesh();
  if (!mesh.contains(rank)) return;  // a world rank outside the mesh holds nothing
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
  // The source and target meshes may differ (a plan between meshes): contributions are the source's, the partition
  // of a created Partial the target's.
  const Mesh& mesh = src.mesh();
  const Mesh& target_mesh = dst.mesh();
  if (!target_mesh.contains(rank)) return 0;  // a world rank outside the target mesh holds nothing
  const std::vector<Placement> from = canonical_placements(mesh, src.placements()),
                               to = canonical_placements(target_mesh, dst.placements());
  const PartialDims sp = partial_dims(mesh, from, "source"), dp = partial_dims(target_mesh, to, "target");
  const Box box = dst.box(rank);
  if (sp.dims.empty() && dp.dims.empty()) return count_mismatches(data, box, dst.global_shape(), dtype);
  const bool same_mesh = mesh == target_mesh;
  const PartialRoles roles = partial_roles(src.with_placements(from), dst.with_placements(to));
  const Dims coord = target_mesh.coord_of(rank);
  const Partition part = partition_for(target_mesh, to, roles.created, dtype, coord);
  // Contributions that rank's value on kept dims reduces: its coordinates on the kept dims, every coordinate of
  // the reduced ones.
  // Without kept dims the contributions reduce to the value itself, except 8-bit averages (pattern.hpp).
  std::vector<Index> qs;
  if (!roles.kept.empty() || (sp.op == ReduceOp::kAvg && narrow_int(dtype) && !roles.reduced.empty())) {
    for (Index r = 0; r < roles.contributions; ++r) {
      Dims c = same_mesh ? coord : Dims(mesh.ndim(), 0);  // kept dims exist only on one mesh
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
      double want = v, magnitude = std::abs(v);
      if (!qs.empty()) {
        magnitude = 0;
        for (size_t j = 0; j < qs.size(); ++j) {
          double c = contribution(v, i, qs[j], sp.count, sp.op, lt);
          magnitude += std::abs(c);
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
        // max and min pick one of their inputs: exact in every format. Sums and averages may round.
        const bool exact = !qs.empty() && (sp.op == ReduceOp::kMax || sp.op == ReduceOp::kMin) && part.divisor == 1;
        ok = ok && std::abs(got - want) <= (exact ? 0.0 : partial_tolerance(lt, magnitude, sp.count));
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

Index count_local_mismatches(const void* data, const Layout& src, const Layout& dst, int rank, DType dtype,
                             DType to_dtype) {
  if (to_dtype == dtype) return count_local_mismatches(data, src, dst, rank, dtype);
  const Mesh& target_mesh = dst.mesh();
  for (int k = 0; k < target_mesh.ndim(); ++k)
    RESHARD_REQUIRE(!dst.placement(k).is_partial() || target_mesh.dim_size(k) == 1,
                    "a converted target cannot be Partial (mesh dim ", k, ")");
  if (!target_mesh.contains(rank)) return 0;  // a world rank outside the target mesh holds nothing
  return count_mismatches(data, dst.box(rank), dst.global_shape(), dtype, to_dtype);
}

}  // namespace reshard
