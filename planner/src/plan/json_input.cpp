#include "plan/json_input.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "reshard/text.hpp"

namespace reshard::detail {

using json = nlohmann::ordered_json;

namespace {

using DomBuilder = nlohmann::detail::json_sax_dom_parser<json>;

// The members of a transfer as the planner writes it, in its order.
enum Member { kSrc, kDst, kOffset, kShape, kBytes, kMembers };
constexpr const char* kMemberNames[kMembers] = {"src", "dst", "global_offset", "shape", "bytes"};

std::optional<Member> member_of(const std::string& key) {
  for (int m = 0; m < kMembers; ++m)
    if (key == kMemberNames[m]) return static_cast<Member>(m);
  return std::nullopt;
}

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

// The pass that builds the document, after Limits has checked it (nlohmann's DOM builder: its per-value callback
// re-scans a parent array at every element's end, quadratic, hence a SAX handler). With a PlanTransfersRead, the
// elements of steps[i].transfers that have the planner's form are read into it instead of into the document.
class Builder {
 public:
  using number_integer_t = json::number_integer_t;
  using number_unsigned_t = json::number_unsigned_t;
  using number_float_t = json::number_float_t;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  Builder(json& root, PlanTransfersRead* transfers) : dom_(root), transfers_(transfers) {}

  bool null() {
    return scalar([&] { return dom_.null(); });
  }
  bool boolean(bool v) {
    return scalar([&] { return dom_.boolean(v); });
  }
  bool number_integer(number_integer_t v) {
    if (capture_ && number(static_cast<Index>(v))) return true;
    return scalar([&] { return dom_.number_integer(v); });
  }
  bool number_unsigned(number_unsigned_t v) {
    if (capture_ && v <= static_cast<number_unsigned_t>(std::numeric_limits<Index>::max()) &&
        number(static_cast<Index>(v)))
      return true;
    return scalar([&] { return dom_.number_unsigned(v); });
  }
  bool number_float(number_float_t v, const string_t& s) {
    return scalar([&] { return dom_.number_float(v, s); });
  }
  bool string(string_t& v) {
    return scalar([&] { return dom_.string(v); });
  }
  bool binary(binary_t& v) {
    return scalar([&] { return dom_.binary(v); });
  }

  bool start_object(std::size_t n) {
    if (capture_) flush();
    const bool transfer = begins_element(true);
    open();
    if (transfer) {
      begin_capture();
      return true;
    }
    return dom_.start_object(n);
  }
  bool end_object() {
    if (capture_ && depth_ == transfers_depth_ + 1 && finish_capture()) return close();
    if (capture_) flush();
    return dom_.end_object() && close();
  }
  bool start_array(std::size_t n) {
    if (capture_ && depth_ == transfers_depth_ + 1 && (member_ == kOffset || member_ == kShape) && !in_array_) {
      open();
      in_array_ = true;
      log_.push_back({Event::kStartArray, member_, 0});
      return true;
    }
    if (capture_) flush();
    const bool steps = transfers_ && depth_ == 1 && key_ == "steps";
    const bool transfers = transfers_ && step_ >= 0 && depth_ == 3 && step_key_ == "transfers";
    begins_element(false);
    open();
    if (steps) {  // a second "steps" member replaces the first, in the document as here
      steps_depth_ = depth_;
      steps_seen_ = 0;
      transfers_->steps.clear();
    }
    if (transfers) {  // likewise a second "transfers" member of a step
      transfers_depth_ = depth_;
      if (transfers_->steps.size() <= static_cast<size_t>(step_)) transfers_->steps.resize(step_ + 1);
      transfers_->steps[step_] = {};
    }
    return dom_.start_array(n);
  }
  bool end_array() {
    if (capture_ && in_array_) {
      in_array_ = false;
      seen_ |= 1u << member_;
      member_ = -1;
      log_.push_back({Event::kEndArray, -1, 0});
      return close();
    }
    if (capture_) flush();
    if (depth_ == transfers_depth_) transfers_depth_ = -1;
    if (depth_ == steps_depth_) steps_depth_ = step_ = -1;
    return dom_.end_array() && close();
  }
  bool key(string_t& k) {
    if (depth_ == 1) key_ = k;
    if (step_ >= 0 && depth_ == 3) step_key_ = k;
    if (capture_ && depth_ == transfers_depth_ + 1 && member_ < 0 && !in_array_) {
      const std::optional<Member> m = member_of(k);
      if (m && !(seen_ & (1u << *m))) {
        member_ = *m;
        log_.push_back({Event::kKey, *m, 0});
        return true;
      }
    }
    if (capture_) flush();
    return dom_.key(k);
  }
  bool parse_error(std::size_t position, const std::string& token, const nlohmann::detail::exception& e) {
    return dom_.parse_error(position, token, e);  // throws it
  }

 private:
  // What a transfer element read so far holds, to give it to the document as it is if it turns out not to have the
  // planner's form.
  struct Event {
    enum Kind { kKey, kNumber, kStartArray, kEndArray } kind;
    int member;
    Index value;
  };

  void begin_capture() {
    capture_ = true;
    seen_ = 0;
    member_ = -1;
    in_array_ = false;
    log_.clear();
    current_ = Transfer{};
  }

  // A number inside a transfer element: false when it does not fit the planner's form (the caller then gives the
  // element to the document).
  bool number(Index v) {
    if (in_array_) {
      Dims& d = member_ == kOffset ? current_.region.offset : current_.region.shape;
      if (d.size() == kMaxDims) return false;
      d.push_back(v);
    } else if (member_ == kSrc || member_ == kDst || member_ == kBytes) {
      if (member_ == kBytes) {
        current_.bytes = v;
      } else if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
        return false;  // left to the caller's range check, which names the field
      } else {
        (member_ == kSrc ? current_.src : current_.dst) = static_cast<int>(v);
      }
      seen_ |= 1u << member_;
      member_ = -1;
    } else {
      return false;
    }
    log_.push_back({Event::kNumber, member_, v});
    return true;
  }

  // The end of a transfer element: true when it had the planner's form (then read, with null in the document).
  bool finish_capture() {
    if (seen_ != (1u << kMembers) - 1) return false;
    capture_ = false;
    PlanTransfersRead::Step& s = transfers_->steps[step_];
    s.transfers.push_back(current_);
    s.read.push_back(1);
    return dom_.null();
  }

  // Gives the transfer element read so far to the document, which builds the rest of it as it comes.
  void flush() {
    capture_ = false;
    PlanTransfersRead::Step& s = transfers_->steps[step_];
    s.transfers.emplace_back();
    s.read.push_back(0);
    dom_.start_object(std::size_t(-1));
    for (const Event& e : log_) {
      switch (e.kind) {
        case Event::kKey: {
          string_t name = kMemberNames[e.member];
          dom_.key(name);
          break;
        }
        case Event::kNumber:
          dom_.number_integer(e.value);
          break;
        case Event::kStartArray:
          dom_.start_array(std::size_t(-1));
          break;
        case Event::kEndArray:
          dom_.end_array();
          break;
      }
    }
  }

  template <class Add>
  bool scalar(Add add) {
    if (capture_) flush();
    begins_element(false);
    return add();
  }
  // Called as a value begins, before open(): notes a new element of the steps array (a new step) and, for an element
  // of a step's transfers array, whether it may be read here (`object`); one that may not is noted as not read.
  bool begins_element(bool object) {
    if (steps_depth_ >= 0 && depth_ == steps_depth_) {
      step_ = steps_seen_++;
      step_key_.clear();
      transfers_depth_ = -1;
    }
    if (transfers_depth_ < 0 || depth_ != transfers_depth_) return false;
    if (object) return true;
    PlanTransfersRead::Step& s = transfers_->steps[step_];
    s.transfers.emplace_back();
    s.read.push_back(0);
    return false;
  }
  void open() { ++depth_; }
  bool close() {
    --depth_;
    return true;
  }

  DomBuilder dom_;
  PlanTransfersRead* transfers_;
  int depth_ = 0;
  std::string key_, step_key_;  // the last member named at the top level, in the open step
  // Transfers: the depth of the steps array and of the open step's transfers array (-1: none open), the open step
  // (its index; -1 outside the steps array) and its key, the element being read.
  int steps_depth_ = -1, transfers_depth_ = -1, step_ = -1, steps_seen_ = 0;
  bool capture_ = false, in_array_ = false;
  unsigned seen_ = 0;  // members read, by bit
  int member_ = -1;    // the member whose value comes next
  Transfer current_;
  std::vector<Event> log_;
};

}  // namespace

json parse_json_input(const std::string& text, std::string_view what, std::optional<JsonArrayLimit> limit,
                      PlanTransfersRead* transfers) {
  // Limits first, in a pass that builds nothing (destroying and walking a deep document recurse; a plan of a million
  // steps is refused before any is built).
  Limits limits(limit);
  json::sax_parse(text, &limits, nlohmann::detail::input_format_t::json, /*strict=*/true, /*ignore_comments=*/false);
  if (limits.too_deep())
    fail(ErrorKind::kParse, cat(what, " nests arrays or objects deeper than ", kMaxJsonDepth, " levels"));
  if (limits.too_many())
    fail(ErrorKind::kInvalidArgument, cat(what, " has more than ", limit->max_elements, " ", limit->key, "; at most ",
                                          limit->max_elements, " are loaded"));
  json j;
  Builder builder(j, transfers);
  try {
    json::sax_parse(text, &builder, nlohmann::detail::input_format_t::json, /*strict=*/true,
                    /*ignore_comments=*/false);
  } catch (const json::exception& e) {  // syntax errors, and numbers out of range ("1e999")
    fail(ErrorKind::kParse, cat(what, " is not valid JSON: ", printable(e.what())));
  }
  return j;
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
