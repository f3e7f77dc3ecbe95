// The dtype pairs and layouts the conversion suites run (dtype_convert_test.cpp on the host backend,
// dtype_convert_gpu_test.cpp on GPUs), and the loop over every strategy and transport that plans them.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "reshard/layout_format.hpp"
#include "reshard/plan_batch.hpp"
#include "reshard/planner.hpp"
#include "reshard/text.hpp"

namespace reshard::testing {

inline Layout layout(const char* mesh, const char* placements, Dims shape) {
  return Layout(parse_mesh(mesh), parse_placements(placements), shape);
}

struct ConvertPair {
  DType from, to;
};

struct ConvertCase {
  const char* from_mesh;
  const char* from;
  const char* to_mesh;
  const char* to;
  Dims shape;
};

// Layouts: every step kind as the last step (all_gather, all_to_all, reduce_scatter, all_reduce, p2p, local),
// uneven shards, 2-D meshes, Partial sources and moves between meshes.
inline const ConvertCase kConvertCases[] = {
    {"2", "S0", "2", "S1", Dims{6, 10}},               // all_to_all / p2p
    {"2", "S0", "2", "R", Dims{7, 3}},                 // all_gather, uneven
    {"2", "R", "2", "S1", Dims{5, 9}},                 // local, uneven
    {"2", "P", "2", "R", Dims{4, 6}},                  // all_reduce
    {"2", "P", "2", "S0", Dims{9, 4}},                 // reduce_scatter, uneven
    {"4", "S0", "4", "S1", Dims{7, 5}},                // uneven both ways
    {"4", "S1", "4", "R", Dims{3, 11}},                // all_gather on strided shards
    {"2x2", "S0,S1", "2x2", "S1,R", Dims{6, 10}},      //
    {"2x2", "R,S0", "2x2", "S0,R", Dims{5, 7}},        //
    {"2x2", "P,S0", "2x2", "S1,R", Dims{8, 6}},        // Partial on one dim
    {"2[0,1]/4", "S0", "2[2,3]/4", "S1", Dims{6, 9}},  // disjoint meshes (training -> serving)
    {"2x2", "S0,S1", "4", "S1", Dims{10, 6}},          // (2,2) -> (4)
    {"2[0,1]/4", "P", "2[2,3]/4", "R", Dims{5, 4}},    // Partial source between meshes
};

inline const ConvertPair kConvertPairs[] = {
    {DType::kBF16, DType::kF16},    {DType::kBF16, DType::kF32},    {DType::kF32, DType::kBF16},
    {DType::kBF16, DType::kF8E4M3}, {DType::kBF16, DType::kF8E5M2}, {DType::kF32, DType::kF8E4M3},
    {DType::kF16, DType::kBF16},    {DType::kF8E4M3, DType::kBF16}, {DType::kF64, DType::kF16}};

inline std::string pair_name(const ::testing::TestParamInfo<ConvertPair>& info) {
  return cat(to_string(info.param.from), "_to_", to_string(info.param.to));
}

// Calls f(plan, description) for every case of kConvertCases (those whose ranks fit `max_world`) converting `pair`,
// planned with every strategy and transport that has a candidate (auto always has one); fp8 sources skip Partial
// cases.
inline void for_each_converting_plan(const ConvertPair& pair,
                                     const std::function<void(const Plan&, const std::string&)>& f,
                                     int max_world = 1 << 20) {
  for (const ConvertCase& c : kConvertCases) {
    const Layout src = layout(c.from_mesh, c.from, c.shape), dst = layout(c.to_mesh, c.to, c.shape);
    if (src.mesh().world_size() > max_world) continue;
    if (src.has_partial() && !reducible(pair.from, ReduceOp::kSum)) continue;  // fp8 sources cannot be Partial
    for (Strategy s : {Strategy::kAuto, Strategy::kCollective, Strategy::kP2P, Strategy::kHybrid}) {
      for (Transport t : {Transport::kNccl, Transport::kNvlink}) {
        if (s == Strategy::kCollective && t == Transport::kNvlink) continue;
        PlanOptions o;
        o.strategy = s;
        o.transport = t;
        std::optional<Plan> plan;
        try {
          plan.emplace(make_converting_plan(src, dst, pair.from, pair.to, o));
        } catch (const Error& e) {
          // Auto always has a plan; another strategy may have no candidate for the case.
          if (s == Strategy::kAuto || e.kind() != ErrorKind::kInvalidArgument) throw;
          continue;
        }
        f(*plan, cat(c.from_mesh, " ", c.from, " -> ", c.to_mesh, " ", c.to, " ", to_string(c.shape), " ",
                     to_string(pair.from), " -> ", to_string(pair.to), " ", to_string(s), "/", to_string(t), " (",
                     to_string(plan->strategy()), ")"));
      }
    }
  }
}

// Calls f(batch, description) for every source mesh of kConvertCases (whose ranks fit `max_world`): its cases
// converting `pair` as one batch (make_plan_batch), planned with strategies auto and p2p on both transports; fp8
// sources skip Partial cases.
inline void for_each_converting_batch(const ConvertPair& pair,
                                      const std::function<void(const PlanBatch&, const std::string&)>& f,
                                      int max_world = 1 << 20) {
  std::vector<std::string> meshes;
  for (const ConvertCase& c : kConvertCases)
    if (std::find(meshes.begin(), meshes.end(), c.from_mesh) == meshes.end()) meshes.emplace_back(c.from_mesh);
  for (const std::string& mesh : meshes) {
    std::vector<BatchEntry> entries;
    for (const ConvertCase& c : kConvertCases) {
      const Layout src = layout(c.from_mesh, c.from, c.shape), dst = layout(c.to_mesh, c.to, c.shape);
      if (mesh != c.from_mesh || src.mesh().world_size() > max_world) continue;
      if (src.has_partial() && !reducible(pair.from, ReduceOp::kSum)) continue;
      entries.push_back(BatchEntry{src, dst, pair.from, pair.to});
    }
    if (entries.empty()) continue;
    for (Strategy s : {Strategy::kAuto, Strategy::kP2P}) {
      for (Transport t : {Transport::kNccl, Transport::kNvlink}) {
        PlanOptions o;
        o.strategy = s;
        o.transport = t;
        f(make_plan_batch(entries, o), cat("mesh ", mesh, ": ", entries.size(), " tensors ", to_string(pair.from),
                                           " -> ", to_string(pair.to), " ", to_string(s), "/", to_string(t)));
      }
    }
  }
}

}  // namespace reshard::testing
