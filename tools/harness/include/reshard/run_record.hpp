// One result record for a verified, timed run, printed the same way by `reshard run` and `reshard bench`: a table
// row (nccl-tests style), a CSV row, a JSON object.
//
// Metrics (decimal GB/s): algbw = tensor bytes / time; busbw = the slowest rank's max(bytes in, bytes out) / time;
// bound = the time no plan can beat on the links (see sweep.hpp and cmd_run.cpp for how each command derives it).
// A figure that does not apply is absent: the table shows "-", CSV an empty field, JSON null (host runs have no link
// bound and no CUDA graph; a zero time has no bandwidth; a run in place, which moves nothing, has none either).
//
// The table names what ran: strategy/transport, and on the host backend the one-sided transport as
// `nvlink-emulated` (its threads carry it out in CPU memory); CSV and JSON keep the plan's transport and the
// backend in columns of their own.
#pragma once

#include <optional>
#include <string>

#include "reshard/harness.hpp"
#include "reshard/overlap.hpp"

namespace reshard {

struct RunRecord {
  std::string mesh, from, to, shape, dtype, strategy, transport, backend, steps;  // steps: "p2p/nvlink+all_gather"
  bool auto_choice = false;  // the strategy auto would pick (bench marks it with '*')
  bool in_place = false;     // an identity plan: the output is the input, nothing is moved
  int ranks = 0;
  Index tensor_bytes = 0, max_rank_bytes = 0;
  double estimated_us = 0;
  TimingSummary timing;
  std::optional<double> graph_us;  // CUDA-graph replays, when measured
  std::optional<double> bound_us;  // the lower bound, when it applies
  Index wrong = 0, checked = 0;
  Index workspace_bytes = 0;

  std::optional<double> algbw_GBps() const;
  std::optional<double> busbw_GBps() const;
  std::optional<double> percent_of_bound() const;  // 100 * bound / time
  std::string label() const;                       // the table's strategy column: "p2p/nvlink-emulated"
};

// The record of `result` for `plan`; bound_us and graph_us are left for the caller.
RunRecord make_record(const Plan& plan, const RunResult& result, const TrafficBound& bound);

// Table: a header line (starting with '#') and one line per record.
std::string record_table_header();
std::string record_table_row(const RunRecord& r);
// The line under a row that says what its label means, when it needs one ("" otherwise).
std::string record_table_note(const RunRecord& r);
// That line for the emulated one-sided transport (bench prints it once in its host backend header).
std::string host_emulation_note();
// CSV: header and rows (each ending in a newline).
std::string record_csv_header();
std::string record_csv_row(const RunRecord& r);
// One JSON object (one line).
std::string record_json(const RunRecord& r);

}  // namespace reshard
