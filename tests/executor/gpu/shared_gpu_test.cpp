// The NVLink transport with more ranks than GPUs (skipped without a GPU): ranks are threads sharing the visible GPUs
// (harness run_shared_gpus, no NCCL), so its one-sided ordering, copy-engine and kernel copies and fused kernels run
// on one GPU too. Every one-sided plan of every placement pair of R/S0/S1/P(sum) on meshes (2), (1,2), (2,1), (3),
// (4) ((2,2): see the disabled test), sizes 0, 1, uneven and a few MiB, separate and fused; eager and CUDA-graph
// replays over many iterations (each flag reused hundreds of times); every element of every rank checked (harness
// protocol). Not under compute-sanitizer: it serialises the ranks' work on the shared GPU and the runs stall.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "placement_sets.hpp"
#include "reshard/cuda_device.hpp"
#include "reshard/harness.hpp"
#include "reshard/planner.hpp"

namespace reshard {
namespace {

// Ranks sharing a GPU hold many streams on it; CUDA multiplexes streams onto CUDA_DEVICE_MAX_CONNECTIONS hardware
// queues (8 by default), and a stream queued behind another rank's wait-value operation could never run its post.
// Set before CUDA starts (static initialisation, before main).
const bool g_connections = [] { return ::setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0) == 0; }();

bool light() {  // RESHARD_GPU_TESTS_LIGHT=1 (under compute-sanitizer): small shapes, fewer iterations
  const char* v = std::getenv("RESHARD_GPU_TESTS_LIGHT");
  return v && *v == '1';
}

// RESHARD_TEST_ONE_PROCESS_COPIES=pull: pulled one-sided copies (kernels) instead of the default pushes.
OneSidedCopies copies() {
  const char* v = std::getenv("RESHARD_TEST_ONE_PROCESS_COPIES");
  return v && std::string(v) == "pull" ? OneSidedCopies::kPull : OneSidedCopies::kPush;
}

// RESHARD_TEST_GRAPH_CALLS=N: calls captured per CUDA graph (RunOptions::graph_calls), 1 by default here. With ranks
// sharing a GPU, graphs of several calls of separate-copy nvlink plans stall (mesh (4) on two GPUs, 64x64 bf16
// S0 -> S1, 10 calls a graph; 1 call a graph passes, as do 10 with one rank per GPU): a known limit,
// docs/transports.md. N = 10 reproduces it.
int graph_calls() {
  const char* v = std::getenv("RESHARD_TEST_GRAPH_CALLS");
  if (!v) return 1;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || n < 1 || n > kMaxGraphCalls) {
    std::fprintf(stderr, "RESHARD_TEST_GRAPH_CALLS must be a whole number from 1 to %d, got '%s'\n", kMaxGraphCalls, v);
    std::exit(2);
  }
  return static_cast<int>(n);
}

bool verbose() {  // RESHARD_TEST_VERBOSE=1: print each run before it starts
  const char* v = std::getenv("RESHARD_TEST_VERBOSE");
  return v && *v == '1';
}

class SharedGpu : public ::testing::Test {
 public:
  void SetUp() override {
    if (local_gpu_count() < 1) GTEST_SKIP() << "needs a GPU";
  }
  // Runs and verifies `plan`; returns the elements checked.
  static Index check(const Plan& plan, int iters, bool graph) {
    RunOptions o;
    o.backend = Backend::kNccl;
    o.warmup = 1;
    o.iters = iters;
    o.cuda_graph = graph;
    o.graph_calls = graph_calls();
    o.timeout = std::chrono::seconds(10);
    o.one_sided_copies = copies();
    if (verbose()) {
      std::printf("  check: %s -> [%s] %s%s%s, %d iterations\n", plan.src().str().c_str(),
                  to_string(plan.dst().placements()).c_str(), std::string(to_string(plan.dtype())).c_str(),
                  plan.steps().empty() || !plan.steps()[0].fused ? " separate" : " fused", graph ? " graph" : " eager",
                  iters);
      std::fflush(stdout);
    }
    const RunResult r = run_shared_gpus(plan, o);
    EXPECT_EQ(r.wrong_elements, 0) << plan.src().str() << " -> [" << to_string(plan.dst().placements()) << "] "
                                   << to_string(plan.dtype())
                                   << (plan.steps().empty() || !plan.steps()[0].fused ? " separate" : " fused")
                                   << (graph ? " graph: " : " eager: ") << r.first_error;
    if (plan.dst().global_shape().product() > 0) {
      EXPECT_GT(r.checked_elements, 0);
    }
    return r.checked_elements;
  }
  // The one-sided plans of a pair: separate copies and fused (where the planner offers p2p on nvlink).
  static std::vector<Plan> one_sided_plans(const Layout& src, const Layout& dst, DType t) {
    std::vector<Plan> plans;
    for (Fusion f : {Fusion::kNever, Fusion::kAlways}) {
      PlanOptions o;
      o.strategy = Strategy::kP2P;
      o.transport = Transport::kNvlink;
      o.fusion = f;
      plans.push_back(make_plan(src, dst, t, o));
    }
    return plans;
  }
};

std::vector<std::vector<Placement>> with_partial(int mesh_ndim) {
  std::vector<std::vector<Placement>> out = testing::all_placements(mesh_ndim, 2);
  std::vector<Placement> p(mesh_ndim, Placement::replicate());
  p[0] = Placement::partial(ReduceOp::kSum);
  out.push_back(p);
  return out;
}

// Every pair of `m`: 1-D meshes at sizes 0, 1, uneven and larger; 2-D meshes uneven, and the pairs that move along
// both mesh dims at once also at 1 and larger. (Runs cost ~0.1 s each: every run connects its ranks anew.)
Index every_pair(const std::vector<int>& m) {
  Mesh mesh(m);
  Index checked = 0;
  const auto start = std::chrono::steady_clock::now();
  int runs = 0;
  auto progress = [&](const char* what) {
    std::printf("mesh %s: %d runs, %.1f s%s\n", mesh.str().c_str(), runs,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), what);
    std::fflush(stdout);
  };
  for (const auto& from : with_partial(mesh.ndim()))
    for (const auto& to : testing::all_placements(mesh.ndim(), 2)) {
      const bool crossing = mesh.ndim() == 2 && from[0] != to[0] && from[1] != to[1] && from[0] != from[1];
      std::vector<Dims> shapes{Dims{7, 5}};
      if (mesh.ndim() == 1 && !light()) shapes = {Dims{0, 4}, Dims{1, 1}, Dims{7, 5}, Dims{300, 517}};
      if (crossing && !light()) shapes = {Dims{1, 1}, Dims{7, 5}, Dims{300, 517}};
      for (const Dims& shape : shapes)
        for (const Plan& plan :
             SharedGpu::one_sided_plans(Layout(mesh, from, shape), Layout(mesh, to, shape), DType::kF32)) {
          if (verbose()) {  // which run a stall is in
            std::printf("  run %d: %s -> [%s] fused=%d\n", runs, plan.src().str().c_str(),
                        to_string(plan.dst().placements()).c_str(), !plan.steps().empty() && plan.steps()[0].fused);
            std::fflush(stdout);
          }
          if (checked += SharedGpu::check(plan, 2, false); ++runs % 50 == 0) progress("");
        }
    }
  progress(", done");
  return checked;
}

TEST_F(SharedGpu, EveryPairOnMeshes2And3And4And1x2And2x1) {
  Index checked = 0;
  for (const std::vector<int>& m : {std::vector<int>{2}, {3}, {4}, {1, 2}, {2, 1}}) checked += every_pair(m);
  std::printf("shared GPU: %lld elements checked\n", static_cast<long long>(checked));
}

// Mesh (2,2), four ranks on one GPU: its groups finish at different times, so a rank that freed its buffers while its
// peers were still running would synchronise the GPU under them and deadlock; ranks meet before freeing
// (run_timed_rank's `finished`).
TEST_F(SharedGpu, EveryPairOnMesh2x2) { every_pair({2, 2}); }

// Between meshes of one world (ranks outside a mesh hold nothing): every pair of R/S0/S1/P(sum) to R/S0/S1 through
// the one-sided transport, separate and fused, every element checked.
TEST_F(SharedGpu, EveryPairBetweenMeshes) {
  struct Pair {
    Mesh from, to;
  };
  const std::vector<Pair> pairs{{Mesh({2, 2}), Mesh({4})},
                                {Mesh({4}), Mesh({2}, {1, 3}, 4)},
                                {Mesh({2}), Mesh({1}, {1}, 2)},
                                {Mesh({2}, {0, 1}, 4), Mesh({2}, {2, 3}, 4)}};
  Index checked = 0;
  int runs = 0;
  for (const Pair& p : pairs)
    for (const auto& from : with_partial(p.from.ndim()))
      for (const auto& to : testing::all_placements(p.to.ndim(), 2))
        for (const Dims& shape : {Dims{1, 1}, Dims{7, 5}}) {
          for (const Plan& plan : one_sided_plans(Layout(p.from, from, shape), Layout(p.to, to, shape), DType::kF32)) {
            if (verbose())
              std::printf("  run %d: %s -> %s\n", runs, plan.src().str().c_str(), plan.dst().str().c_str());
            checked += check(plan, 2, false);
            ++runs;
          }
        }
  std::printf("between meshes: %d runs, %lld elements checked\n", runs, static_cast<long long>(checked));
}

// Hundreds of runs back to back, eager and replayed from a CUDA graph: a flag protocol that re-armed too early, lost a
// post or let a run overtake its predecessor shows up as a hang (timeout) or a wrong element.
TEST_F(SharedGpu, ManyIterationsEagerAndGraph) {
  const int iters = light() ? 20 : 300;
  for (std::vector<int> m : {std::vector<int>{2}, {4}}) {
    Mesh mesh(m);
    const std::vector<Placement> s0(m.size(), Placement::shard(0)), s1(m.size(), Placement::shard(1));
    for (const Dims& shape :
         light() ? std::vector<Dims>{Dims{64, 64}} : std::vector<Dims>{Dims{64, 64}, Dims{1024, 1024}})
      for (const Plan& plan : one_sided_plans(Layout(mesh, s0, shape), Layout(mesh, s1, shape), DType::kBF16))
        for (bool graph : {false, true}) check(plan, iters, graph);
  }
}

// Copy-engine rows (wide contiguous rows go to the copy engines) and kernel rows (narrow) in one larger tensor.
TEST_F(SharedGpu, CopyEngineAndKernelRows) {
  if (light()) GTEST_SKIP() << "light mode: no large tensors";
  Mesh mesh({2});
  for (const Dims& shape : {Dims{4096, 4096}, Dims{4099, 7}})
    for (const char* pair : {"S0>S1", "S1>S0", "S0>R", "R>S1"}) {
      const std::string p(pair);
      const auto gt = p.find('>');
      const Layout src(mesh, parse_placements(p.substr(0, gt)), shape);
      const Layout dst(mesh, parse_placements(p.substr(gt + 1)), shape);
      for (const Plan& plan : one_sided_plans(src, dst, DType::kF32)) check(plan, 5, false);
    }
}

// CudaStream's pool (cuda_device.hpp): an idle stream comes back to the next CudaStream of its device, a busy one
// (work still queued at destruction) never does, and the work queued on it still runs.
TEST_F(SharedGpu, StreamsAreReusedWhenIdleNeverWhenBusy) {
  cudaStream_t given_back_first = nullptr, given_back_last = nullptr;
  {
    CudaStream x(0), y(0);  // both live at once: distinct streams; y is destroyed (given back) first, then x
    given_back_last = x.get();
    given_back_first = y.get();
  }
  ASSERT_NE(given_back_first, given_back_last);
  std::atomic<bool> release{false}, ran{false};
  struct Gate {
    std::atomic<bool>* release;
    std::atomic<bool>* ran;
  } gate{&release, &ran};
  {
    CudaStream busy(0);
    ASSERT_EQ(busy.get(), given_back_last);  // the last stream given back comes first
    ASSERT_EQ(cudaLaunchHostFunc(
                  busy.get(),
                  [](void* g) {
                    auto* gt = static_cast<Gate*>(g);
                    while (!gt->release->load()) std::this_thread::yield();
                    gt->ran->store(true);
                  },
                  &gate),
              cudaSuccess);
  }  // destroyed with its host function still waiting: not given back
  {
    CudaStream next(0);
    EXPECT_EQ(next.get(), given_back_first) << "a stream destroyed busy came back from the pool";
  }
  release = true;
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(ran.load()) << "the work queued on the busy stream did not run";
}

TEST_F(SharedGpu, RefusesPlansWithNcclSteps) {
  Mesh mesh({2});
  PlanOptions o;
  o.strategy = Strategy::kCollective;
  const Plan plan = make_plan(Layout(mesh, parse_placements("S0"), Dims{8, 8}),
                              Layout(mesh, parse_placements("R"), Dims{8, 8}), DType::kF32, o);
  RunOptions r;
  r.backend = Backend::kNccl;
  try {
    run_shared_gpus(plan, r);
    ADD_FAILURE() << "a collective plan ran on shared GPUs";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("one-sided"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace reshard
