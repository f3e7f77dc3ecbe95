// A PlanBatch as JSON: its plans in plan_json's schema, in one document.
#include <nlohmann/json.hpp>

#include "plan/json_input.hpp"
#include "reshard/plan_batch.hpp"
#include "reshard/plan_json.hpp"

namespace reshard {

namespace {
constexpr const char* kBatchSchema = "reshard.batch/1";
}

std::string batch_to_json(const PlanBatch& batch) {
  std::string out = cat("{\"schema\": \"", kBatchSchema, "\",\n \"plans\": [\n");
  for (size_t i = 0; i < batch.size(); ++i) {
    std::string one = plan_to_json(batch.plan(i));
    while (!one.empty() && one.back() == '\n') one.pop_back();
    out += one;
    out += i + 1 < batch.size() ? ",\n" : "\n";
  }
  return out + "]}\n";
}

PlanBatch batch_from_json(const std::string& text) {
  const nlohmann::ordered_json j = detail::parse_json_input(text, "batch");
  if (!j.is_object()) fail(ErrorKind::kParse, "a plan batch must be a JSON object");
  auto schema = j.find("schema");
  if (schema == j.end() || !schema->is_string() || schema->get<std::string>() != kBatchSchema)
    fail(ErrorKind::kParse, cat("a plan batch needs \"schema\": \"", kBatchSchema, "\""));
  auto plans = j.find("plans");
  if (plans == j.end() || !plans->is_array() || plans->empty())
    fail(ErrorKind::kParse, "a plan batch needs a non-empty array \"plans\"");
  RESHARD_REQUIRE(plans->size() <= kMaxBatchTensors, "a plan batch of ", plans->size(), " tensors; at most ",
                  kMaxBatchTensors);
  std::vector<std::shared_ptr<const Plan>> out;
  for (size_t i = 0; i < plans->size(); ++i) {
    try {
      out.push_back(std::make_shared<const Plan>(plan_from_json((*plans)[i].dump())));
    } catch (const Error& e) {
      throw Error(e.kind(), cat("tensor ", i, " of the batch: ", e.what()));
    }
  }
  return PlanBatch(std::move(out));
}

}  // namespace reshard
