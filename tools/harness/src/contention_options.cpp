// The GEMM spec and the options of an contention measurement (gemm_contention.hpp): parsed and checked the same way in
// every build, with or without CUDA.
#include <fmt/format.h>

#include "reshard/checked_math.hpp"
#include "reshard/gemm_contention.hpp"
#include "reshard/text.hpp"

namespace reshard {
namespace {

template <class... Parts>
void require_parse(bool ok, const Parts&... parts) {
  if (!ok) fail(ErrorKind::kParse, cat(parts...));
}

}  // namespace

GemmSpec parse_gemm_spec(std::string_view text, std::string_view flag) {
  const std::string quoted = cat(flag, " '", printable(text), "'");
  const std::string form = "MxNxK[:dtype], e.g. 8192x8192x8192:bf16";
  GemmSpec gemm;
  std::string_view dims = text;
  if (size_t colon = text.find(':'); colon != std::string_view::npos) {
    dims = text.substr(0, colon);
    const std::string_view name = text.substr(colon + 1);
    require_parse(!name.empty(), quoted, ": the dtype after ':' is empty; expected ", form);
    try {
      gemm.dtype = parse_dtype(name);
    } catch (const Error& e) {
      fail(ErrorKind::kParse, cat(quoted, ": ", e.what()));
    }
    require_parse(gemm.dtype == DType::kBF16 || gemm.dtype == DType::kF16 || gemm.dtype == DType::kF32, quoted,
                  ": the GEMM dtype must be bf16, f16 or f32, got ", to_string(gemm.dtype));
  }
  std::vector<std::string_view> parts = split(dims, 'x');
  require_parse(parts.size() == 3, quoted, " must be ", form, " (three extents, got ", parts.size(), ")");
  Index* extents[] = {&gemm.m, &gemm.n, &gemm.k};
  const char* names[] = {"M", "N", "K"};
  for (int i = 0; i < 3; ++i) {
    bool overflow = false;
    std::optional<long long> v = parse_integer(parts[i], &overflow);
    require_parse(v.has_value(), quoted, ": ", names[i], " '", printable(parts[i]), "' ",
                  overflow ? "does not fit in 64 bits" : "is not a whole number", "; expected ", form);
    require_parse(*v >= 1 && *v <= kMaxGemmExtent, quoted, ": ", names[i], " = ", *v, " is out of range (1..",
                  kMaxGemmExtent, ")");
    *extents[i] = *v;
  }
  return gemm;
}

std::string to_string(const GemmSpec& gemm) {
  return fmt::format("{}x{}x{}:{}", gemm.m, gemm.n, gemm.k, to_string(gemm.dtype));
}

Index gemm_operand_bytes(const GemmSpec& gemm) {
  const Index es = element_size(gemm.dtype);
  const char* what = "the GEMM's operand bytes";
  Index a = checked_mul(gemm.m, gemm.k, es, what), b = checked_mul(gemm.k, gemm.n, es, what);
  Index c = checked_mul(gemm.m, gemm.n, es, what);
  return checked_add(checked_add(a, b, what), c, what);
}

double gemm_flops(const GemmSpec& gemm) {
  return 2.0 * static_cast<double>(gemm.m) * static_cast<double>(gemm.n) * static_cast<double>(gemm.k);
}

void check_contention_options(const ContentionOptions& o) {
  RESHARD_REQUIRE(o.repeats >= kMinContentionRepeats && o.repeats <= kMaxContentionRepeats,
                  "--repeats must be between ", kMinContentionRepeats, " and ", kMaxContentionRepeats,
                  " (the figures are medians over the repeats), got ", o.repeats);
  RESHARD_REQUIRE(o.gemms >= 1 && o.gemms <= kMaxGemmsPerLoop, "--iters (GEMMs per loop) must be between 1 and ",
                  kMaxGemmsPerLoop, ", got ", o.gemms);
  RESHARD_REQUIRE(o.warmup >= 0 && o.warmup <= kMaxGemmsPerLoop, "--warmup must be between 0 and ", kMaxGemmsPerLoop,
                  ", got ", o.warmup);
  RESHARD_REQUIRE(o.timeout.count() >= 1, "the timeout must be >= 1 ms, got ", o.timeout.count());
  for (Index e : {o.gemm.m, o.gemm.n, o.gemm.k})
    RESHARD_REQUIRE(e >= 1 && e <= kMaxGemmExtent, "GEMM extents must be between 1 and ", kMaxGemmExtent, ", got ",
                    to_string(o.gemm));
  RESHARD_REQUIRE(o.gemm.dtype == DType::kBF16 || o.gemm.dtype == DType::kF16 || o.gemm.dtype == DType::kF32,
                  "the GEMM dtype must be bf16, f16 or f32, got ", to_string(o.gemm.dtype));
}

}  // namespace reshard
