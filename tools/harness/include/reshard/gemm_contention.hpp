// Redistribution beside compute: how much a redistribution and back-to-back GEMMs slow each other down when the same
// GPUs run both at once (`reshard contention`, docs/cli-measure.md).
//
// Every rank is a thread of this process driving GPU r (one NCCL communicator each, as the harness's NCCL runs).
// On every GPU the redistribution runs on the executor's stream and the GEMMs (cuBLAS, cublasGemmEx) on a second
// non-blocking stream. After two verified runs (the target poisoned with 0xA5, then 0x5A, and every element checked
// against the pattern, as every harness run starts) and a warm-up, a calibration times the GEMM loop and the
// redistribution alone and fixes R, the redistributions per loop, so that R redistributions alone take about as long
// as the loop of G GEMMs (agreed between the ranks: the largest rank's R). Then each repeat has three phases, each
// started after a barrier of all ranks (a one-element all-reduce waited on by the host), so that no rank's phase
// overlaps another rank's:
//   1. GEMM alone: G GEMMs back to back, bracketed by two events on the GEMM stream;
//   2. redistribution alone: R runs back to back, bracketed by two events on the executor's stream;
//   3. both at once: the G GEMMs and the R runs enqueued interleaved (in proportion, so both streams start together
//      and neither runs dry while the host enqueues), each stream bracketed by its own events; the target was
//      poisoned before the phase and every element is verified after it.
// In CUDA-graph mode (ContentionOptions::cuda_graph) one redistribution and one GEMM are each captured into a CUDA
// graph after the warm-up (the redistribution's graph replayed once into a poisoned target and verified), and the
// calibration and all three phases replay the graphs (one launch per GEMM / per redistribution) instead of
// enqueueing the work; everything else is as above.
// Per figure and repeat the slowest rank's time counts (per GEMM: loop time / G; per redistribution: loop time / R);
// the result holds their medians over the repeats, and slowdown = beside / alone - 1 of the medians.
//
// Resources: before anything is allocated, every GPU's need (the plan's source, target and workspace, the GEMM's
// A, B and C, and a reserve for cuBLAS's workspace) is checked against its free memory (memory_check.hpp).
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "reshard/plan.hpp"

namespace reshard {

// C (m x n) = A (m x k) * B (k x n), all three of `dtype` (bf16, f16 or f32; accumulated in f32).
struct GemmSpec {
  Index m = 8192, n = 8192, k = 8192;
  DType dtype = DType::kBF16;
};

inline constexpr Index kMaxGemmExtent = Index(1) << 20;  // per extent (cuBLAS takes int dims and leading dims)
inline constexpr int kMinContentionRepeats = 5;
inline constexpr int kMaxContentionRepeats = 1000;
inline constexpr int kMaxGemmsPerLoop = 100000;
inline constexpr int kMaxRedistributionsPerLoop = 100000;

// "MxNxK[:dtype]", e.g. "8192x8192x8192:bf16" (dtype bf16 when left out; bf16, f16 or f32, PyTorch's names too):
// kParse naming `flag` and the problem otherwise; every extent in 1..kMaxGemmExtent.
GemmSpec parse_gemm_spec(std::string_view text, std::string_view flag = "--gemm");
std::string to_string(const GemmSpec& gemm);     // "8192x8192x8192:bf16"
Index gemm_operand_bytes(const GemmSpec& gemm);  // A + B + C (overflow checked)
double gemm_flops(const GemmSpec& gemm);         // 2 m n k

struct ContentionOptions {
  GemmSpec gemm;
  int repeats = 5;  // kMinContentionRepeats..kMaxContentionRepeats; the figures are medians over them
  int gemms = 50;   // GEMMs per loop (G), 1..kMaxGemmsPerLoop
  int warmup = 3;   // untimed GEMMs and redistributions before the calibration, >= 0
  // CUDA-graph mode: one redistribution and one GEMM are captured, each into its own CUDA graph on its stream, after
  // the warm-up; every timed phase (the calibration included) replays the graphs instead of enqueueing the work.
  bool cuda_graph = false;
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};  // a phase or barrier longer than this aborts
};
// kInvalidArgument naming the option out of range.
void check_contention_options(const ContentionOptions& options);

struct ContentionResult {
  int ranks = 0;
  GemmSpec gemm;
  int gemms_per_loop = 0;            // G
  int redistributions_per_loop = 0;  // R
  int repeats = 0;
  bool cuda_graph = false;  // the work was replayed from CUDA graphs
  // Medians over the repeats of the slowest rank's time, per GEMM and per redistribution (microseconds).
  double gemm_alone_us = 0, gemm_beside_us = 0;
  double redistribution_alone_us = 0, redistribution_beside_us = 0;
  double gemm_slowdown = 0;            // gemm_beside_us / gemm_alone_us - 1
  double redistribution_slowdown = 0;  // redistribution_beside_us / redistribution_alone_us - 1
  // Phase 3, medians of the slowest rank: how long each stream's whole loop took (how well the two spans matched).
  double gemm_loop_beside_us = 0, redistribution_loop_beside_us = 0;
  // Per repeat, the slowest rank's figures (the medians' inputs), per GEMM / per redistribution.
  std::vector<double> gemm_alone_samples, gemm_beside_samples;
  std::vector<double> redistribution_alone_samples, redistribution_beside_samples;
  Index wrong_elements = 0;  // summed over ranks and verification passes (the two first runs and every repeat)
  Index checked_elements = 0;
  size_t workspace_bytes = 0;  // largest rank's
};

// Runs each plan in turn on the same GPUs and communicators (rank r on GPU r), with the same GEMM operands; one
// result per plan. The plans must be global (not scoped to a rank) and share their mesh's size. kInvalidArgument
// when fewer GPUs than ranks are visible, when this reshard was built without CUDA, NCCL or cuBLAS, or when a GPU
// lacks the memory; kTimeout when a phase stalls; Interrupted on a stop request.
std::vector<ContentionResult> run_contention(const std::vector<Plan>& plans, const ContentionOptions& options);

}  // namespace reshard
