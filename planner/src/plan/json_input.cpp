#include "plan/json_input.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "reshard/text.hpp"

namespace reshard::detail {

using json = nlohmann::ordered_json;

namespace {

// A pass over the document that builds nothing: the deepest nesting, and the element count of one top-level array
// member (JsonArrayLimit), stopping as soon as either passes its limit.
class Limits : public nlohmann::json_sax<json> {
 public:
  explicit Limits(std::optional<JsonArrayLimit> limit) : limit_(limit) {}
  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override { return open(); }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override {
    const bool counting = depth_ == 1 && limit_ && key_ == limit_->key;
    if (!open()) return false;
    if (counting) counted_depth_ = depth_;
    return true;
  }
  bool end_array() override {
    if (depth_ == counted_depth_) counted_depth_ = -1;
    return close();
  }
  bool key(string_t& k) override {
    if (depth_ == 1) key_ = k;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;  // the parser proper reports it
  }
  bool too_deep() const { return too_deep_; }
  size_t elements() const { return elements_; }
  bool too_many() const { return limit_ && elements_ > limit_->max_elements; }

 private:
  bool value() {
    if (depth_ == counted_depth_ && ++elements_ > limit_->max_elements) return false;
    return true;
  }
  bool open() {
    if (!value()) return false;
    if (++depth_ > kMaxJsonDepth) {
      too_deep_ = true;
      return false;
    }
    return true;
  }
  bool close() {
    --depth_;
    return true;
  }
  std::optional<JsonArrayLimit> limit_;
  int depth_ = 0, counted_depth_ = -1;
  std::string key_;
  size_t elements_ = 0;
  bool too_deep_ = false;
};

}  // namespace

json parse_json_input(const std::string& text, std::string_view what, std::optional<JsonArrayLimit> limit) {
  // Limits first, in a pass that builds nothing (nlohmann's parser is iterative, but destroying and walking a deep
  // document recurse, and its per-value callback re-scans a parent array at every element's end: quadratic).
  Limits limits(limit);
  json::sax_parse(text, &limits, nlohmann::detail::input_format_t::json, /*strict=*/true, /*ignore_comments=*/false);
  if (limits.too_deep())
    fail(ErrorKind::kParse, cat(what, " nests arrays or objects deeper than ", kMaxJsonDepth, " levels"));
  if (limits.too_many())
    fail(ErrorKind::kInvalidArgument, cat(what, " has more than ", limit->max_elements, " ", limit->key, "; at most ",
                                          limit->max_elements, " are loaded"));
  try {
    return json::parse(text);
  } catch (const json::exception& e) {  // syntax errors, and numbers out of range ("1e999")
    fail(ErrorKind::kParse, cat(what, " is not valid JSON: ", printable(e.what())));
  }
}

std::optional<Index> json_int64(const json& v, const std::string& field) {
  const auto too_large = [&] {
    fail(ErrorKind::kInvalidArgument, cat(field, " value ", v.dump(), " does not fit in 64 bits"));
  };
  if (v.is_number_unsigned()) {
    if (v.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<Index>::max())) too_large();
    return static_cast<Index>(v.get<std::uint64_t>());
  }
  if (v.is_number_integer()) return v.get<Index>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::abs(d) >= 9.2233720368547758e18) too_large();
  }
  return std::nullopt;
}

}  // namespace reshard::detail
