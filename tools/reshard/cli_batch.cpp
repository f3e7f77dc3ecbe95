#include "cli_batch.hpp"

#include <fmt/format.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "reshard/batch_bench.hpp"
#include "reshard/plan_batch.hpp"
#include "reshard/plan_format.hpp"
#include "reshard/text.hpp"

namespace reshard::cli {
namespace {

std::vector<DType> dtype_list(const BatchFlags& f) {
  std::vector<DType> out;
  if (f.dtypes.empty()) return out;
  for (std::string_view d : split(f.dtypes, ',')) out.push_back(parse_dtype(d));
  return out;
}

Index coalesce_bytes(const BatchFlags& f) {
  return f.coalesce.empty() ? kDefaultCoalesceMaxBytes : parse_bytes("--coalesce-bytes", f.coalesce);
}

void check_count(const BatchFlags& f) {
  RESHARD_REQUIRE(f.count >= 1 && static_cast<size_t>(f.count) <= kMaxBatchTensors, "--batch must be between 1 and ",
                  kMaxBatchTensors, ", got ", f.count);
}

// --tensor SHAPE:FROM:TO[:DTYPE]: FROM on the request's source mesh, TO on its target mesh (the same mesh, or the
// --to-mesh of a cross-mesh request).
BatchEntry parse_tensor(const std::string& spec, const PlanRequest& req) {
  const std::vector<std::string_view> parts = split(spec, ':');
  RESHARD_REQUIRE(parts.size() == 3 || parts.size() == 4, "--tensor '", printable(spec),
                  "' must be SHAPE:FROM:TO or SHAPE:FROM:TO:DTYPE (e.g. 64x32:S0:R:bf16)");
  const Dims shape = parse_shape(parts[0]);
  return BatchEntry{Layout(req.src.mesh(), parse_placements(parts[1]), shape),
                    Layout(req.dst.mesh(), parse_placements(parts[2]), shape),
                    parts.size() == 4 ? parse_dtype(parts[3]) : req.dtype};
}

// Every group's run combined: times add up (the groups run one after another), checks add up, the workspace is the
// largest group's.
RunResult combine(const std::vector<RunResult>& runs) {
  RunResult out = runs.front();
  for (size_t g = 1; g < runs.size(); ++g) {
    const RunResult& r = runs[g];
    out.timing.min_us += r.timing.min_us;
    out.timing.median_us += r.timing.median_us;
    out.timing.max_us += r.timing.max_us;
    out.checked_elements += r.checked_elements;
    out.wrong_elements += r.wrong_elements;
    out.workspace_bytes = std::max(out.workspace_bytes, r.workspace_bytes);
    if (out.first_error.empty()) out.first_error = r.first_error;
  }
  out.median_us = out.timing.median_us;
  return out;
}

}  // namespace

void add_batch_flags(CLI::App& cmd, BatchFlags& f, bool run) {
  f.count_option = cmd.add_option(
      "--batch", f.count,
      run ? "Run the tensor this many times over in one call (a batch; dtypes from --batch-dtypes)"
          : "Batch mode: per case, this many tensors in one call vs one tensor of their total size vs one alone");
  cmd.add_option("--batch-dtypes", f.dtypes, "Dtypes cycled over the batch's tensors, comma-separated (e.g. f32,bf16)");
  if (run)
    cmd.add_option("--tensor", f.tensors,
                   "Another tensor of the batch on the same mesh: SHAPE:FROM:TO[:DTYPE] (repeatable; e.g. "
                   "64x32:S0:R:bf16)");
  cmd.add_option("--coalesce-bytes", f.coalesce,
                 "Batches: messages of at most this many bytes are staged to join one send per rank pair (0: only "
                 "those staged anyway; default 1MiB)");
}

int run_batch_command(const PlanRequest& req, const BatchFlags& f, RunOptions options, std::optional<Output>& json) {
  check_count(f);
  const std::vector<DType> dtypes = dtype_list(f);
  std::vector<BatchEntry> entries;
  for (int i = 0; i < f.count; ++i)
    entries.push_back({req.src, req.dst, dtypes.empty() ? req.dtype : dtypes[i % dtypes.size()]});
  for (const std::string& spec : f.tensors) entries.push_back(parse_tensor(spec, req));
  // --to-dtype: every tensor converts to it (a batch converts one pair: PlanBatch refuses others, naming the tensor).
  if (req.to_dtype != req.dtype)
    for (BatchEntry& e : entries) e.to_dtype = req.to_dtype;
  RESHARD_REQUIRE(entries.size() <= kMaxBatchTensors, "a batch of ", entries.size(), " tensors; at most ",
                  kMaxBatchTensors);
  options.coalesce_max_bytes = coalesce_bytes(f);
  const PlanBatch batch = make_plan_batch(entries, req.options);
  // --memory-budget bounds the workspace of the whole set: its tensors run in consecutive groups that each fit.
  const LowerOptions lowering{options.stage_schedule, options.coalesce_max_bytes, options.one_sided_copies};
  const std::vector<std::vector<size_t>> groups = budget_groups(batch, req.options.memory_budget_bytes, lowering);
  std::vector<RunResult> runs;
  for (const std::vector<size_t>& g : groups)
    runs.push_back(groups.size() == 1 ? run_batch(batch, options) : run_batch(sub_batch(batch, g), options));
  const RunResult r = combine(runs);
  Index bytes = 0;
  for (const auto& p : batch.plans()) bytes += p->src().global_volume() * p->element_size();
  const TimingSummary& t = r.timing;
  if (json) {
    nlohmann::ordered_json j = {{"tensors", batch.size()},
                                {"ranks", r.ranks},
                                {"backend", to_string(r.backend)},
                                {"bytes", bytes},
                                {"median_us", t.median_us},
                                {"min_us", t.min_us},
                                {"max_us", t.max_us},
                                {"estimated_us", batch.estimated_us()},
                                {"workspace_bytes", r.workspace_bytes},
                                {"groups", groups.size()},
                                {"checked", r.checked_elements},
                                {"wrong", r.wrong_elements}};
    json->write(j.dump() + "\n");
    json->flush();
  }
  if (!json || !json->is_stdout())
    Output::standard().write(fmt::format(
        "# reshard run: a batch of {} tensors ({} in all) on {} ranks, {} backend, {} timed iterations, {}\n"
        "# time per call (us): min {:.1f}, median {:.1f}, max {:.1f}; algbw {:.2f} GB/s; estimated {:.1f} us (the "
        "plans' sum)\n"
        "# verified {} elements on {} ranks: {}; peak workspace {} per rank\n",
        batch.size(), human_bytes(static_cast<double>(bytes)), r.ranks, to_string(r.backend), t.iterations,
        groups.size() == 1
            ? std::string("one call each")
            : fmt::format("{} calls each (groups within the memory budget, times summed)", groups.size()),
        t.min_us, t.median_us, t.max_us, t.median_us > 0 ? bytes / (t.median_us * 1e3) : 0.0, batch.estimated_us(),
        r.checked_elements, r.ranks,
        r.wrong_elements == 0 ? std::string("all correct") : fmt::format("{} WRONG", r.wrong_elements),
        human_bytes(static_cast<double>(r.workspace_bytes))));
  if (r.wrong_elements != 0)
    fail(ErrorKind::kMismatch, cat(r.wrong_elements, " of ", r.checked_elements, " elements are wrong"));
  return 0;
}

int bench_batch_command(const SweepOptions& o, const BatchFlags& f, std::optional<Output>& json,
                        std::optional<Output>& csv) {
  check_count(f);
  BatchBenchOptions bo;
  bo.tensors = f.count;
  bo.dtypes = dtype_list(f);
  bo.coalesce_max_bytes = coalesce_bytes(f);
  const std::vector<SweepCase> cases = sweep_cases(o);
  const bool table = !json || !json->is_stdout();
  Output out = Output::standard();
  if (table)
    out.write(fmt::format(
        "# reshard bench --batch {}: per case, {} tensors in one call (batch) vs one tensor of dim 0 x {} (one) vs one "
        "tensor alone (single); {} backend; medians in us; ratio = batch / one\n"
        "{:<8} {:<10} {:<10} {:<14} {:<6} {:<18} {:>10} {:>10} {:>10} {:>10} {:>7}\n",
        f.count, f.count, f.count, to_string(o.backend), "mesh", "from", "to", "shape", "dtype", "strategy", "batch_us",
        "one_us", "single_us", "bytes", "ratio"));
  if (csv) {
    csv->write(
        "mesh,from,to,shape,dtype,strategy,transport,tensors,batch_bytes,one_bytes,batch_us,one_us,single_us,"
        "ratio,wrong\n");
    csv->flush();
  }
  if (json) json->write("[");
  size_t rows = 0;
  Index wrong = 0, checked = 0;
  const auto rows_out = run_batch_bench(o, cases, bo, [&](const BatchBenchRow& row) {
    std::string mesh;
    for (size_t i = 0; i < row.c.mesh.size(); ++i) mesh += (i ? "x" : "") + std::to_string(row.c.mesh[i]);
    const std::string from = to_string(row.c.from), to = to_string(row.c.to), shape = to_string(row.c.shape);
    const std::string strategy = fmt::format("{}/{}", to_string(row.run.strategy), to_string(row.run.transport));
    const double ratio = row.one_us > 0 ? row.batch_us / row.one_us : 0;
    if (table) {
      out.write(fmt::format("{:<8} {:<10} {:<10} {:<14} {:<6} {:<18} {:>10.1f} {:>10.1f} {:>10.1f} {:>10} {:>7.2f}\n",
                            mesh, from, to, shape, to_string(row.c.dtype), strategy, row.batch_us, row.one_us,
                            row.single_us, row.batch_bytes, ratio));
      out.flush();
    }
    if (csv) {
      csv->write(fmt::format("{},\"{}\",\"{}\",{},{},{},{},{},{},{},{:.3f},{:.3f},{:.3f},{:.4f},{}\n", mesh, from, to,
                             shape, to_string(row.c.dtype), to_string(row.run.strategy), to_string(row.run.transport),
                             row.tensors, row.batch_bytes, row.one_bytes, row.batch_us, row.one_us, row.single_us,
                             ratio, row.wrong));
      csv->flush();
    }
    if (json) {
      nlohmann::ordered_json j = {{"mesh", row.c.mesh},
                                  {"from", from},
                                  {"to", to},
                                  {"shape", row.c.shape.vec()},
                                  {"dtype", to_string(row.c.dtype)},
                                  {"strategy", to_string(row.run.strategy)},
                                  {"transport", to_string(row.run.transport)},
                                  {"tensors", row.tensors},
                                  {"batch_bytes", row.batch_bytes},
                                  {"one_bytes", row.one_bytes},
                                  {"batch_us", row.batch_us},
                                  {"one_us", row.one_us},
                                  {"single_us", row.single_us},
                                  {"ratio", ratio},
                                  {"checked", row.checked},
                                  {"wrong", row.wrong}};
      json->write((rows ? ",\n " : "\n ") + j.dump());
      json->flush();
    }
    ++rows;
    wrong += row.wrong;
    checked += row.checked;
  });
  if (json) {
    json->write("\n]\n");
    json->flush();
  }
  if (table) out.write(fmt::format("# {} rows, {} elements checked, {} wrong\n", rows_out.size(), checked, wrong));
  if (wrong) fail(ErrorKind::kMismatch, cat(wrong, " wrong elements in the batch benchmark"));
  return 0;
}

}  // namespace reshard::cli
