// The executor on GPUs over NCCL (skipped where fewer than 2 GPUs are visible): every strategy and dtype on meshes
// (2), (1,2), (2,1), sizes from 0 bytes to 1 GiB, CUDA-graph replay, zero-copy paths, timeouts, bad buffers and
// one process per rank. Every element of every rank is checked (harness protocol).
#include <gtest/gtest.h>

#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "cli_runner.hpp"
#include "placement_sets.hpp"
#include "reshard/cuda_device.hpp"
#include "reshard/executor.hpp"
#include "reshard/harness.hpp"
#include "reshard/host_backend.hpp"
#include "reshard/nccl_communicator.hpp"
#include "reshard/planner.hpp"
#include "reshard/rendezvous.hpp"
#include "test_plans.hpp"

namespace reshard {
namespace {

std::atomic<long long> g_runs{0}, g_checked{0}, g_wrong{0};

// RESHARD_GPU_TESTS_LIGHT=1 (runs under compute-sanitizer): small shapes, one dtype per pair, mesh (2) only, no 1 GiB
// tensors.
bool light() {
  const char* v = std::getenv("RESHARD_GPU_TESTS_LIGHT");
  return v && *v == '1';
}

class GpuEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    if (g_runs > 0)
      std::printf("GPU SUMMARY: %lld verified runs, %lld elements checked, %lld wrong\n", g_runs.load(),
                  g_checked.load(), g_wrong.load());
  }
};
const auto* g_env = ::testing::AddGlobalTestEnvironment(new GpuEnvironment);

class Gpu : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (local_gpu_count() >= 2) runner_ = new LocalRunner(Backend::kNccl, 2, std::chrono::seconds(60));
  }
  static void TearDownTestSuite() {
    delete runner_;
    runner_ = nullptr;
  }
  void SetUp() override {
    if (local_gpu_count() < 2) GTEST_SKIP() << "needs 2 GPUs; " << local_gpu_count() << " visible";
  }
  static RunResult check(const Plan& plan, RunOptions o = quick()) {
    RunResult r = runner_->run(plan, o);
    ++g_runs;
    g_checked += r.checked_elements;
    g_wrong += r.wrong_elements;
    EXPECT_EQ(r.wrong_elements, 0) << plan.src().str() << " -> [" << to_string(plan.dst().placements()) << "] "
                                   << to_string(plan.dtype()) << " " << to_string(plan.strategy());
    return r;
  }
  static RunOptions quick() {
    RunOptions o;
    o.warmup = 0;
    o.iters = 1;
    return o;
  }
  static LocalRunner* runner_;
};
LocalRunner* Gpu::runner_ = nullptr;

std::vector<Plan> plans_for(const Layout& src, const Layout& dst, DType t) {
  std::vector<Plan> plans;
  PlanOptions o;
  Plan automatic = make_plan(src, dst, t, o);
  for (const Candidate& c : automatic.candidates()) {
    if (!c.available) continue;
    o.strategy = c.strategy;
    o.transport = c.transport;  // every candidate: both transports
    if (c.transport != Transport::kNvlink) {
      plans.push_back(make_plan(src, dst, t, o));
      continue;
    }
    for (Fusion f : {Fusion::kNever, Fusion::kAlways}) {  // nvlink: separate peer copies and one fused kernel
      o.fusion = f;
      plans.push_back(make_plan(src, dst, t, o));
    }
    o.fusion = Fusion::kAuto;
  }
  return plans;
}

TEST_F(Gpu, EveryPairAndStrategyOnMeshes2And1x2And2x1) {
  for (std::vector<int> m : {std::vector<int>{2}, {1, 2}, {2, 1}}) {
    Mesh mesh(m);
    std::vector<Dims> shapes{Dims{0, 4}, Dims{1, 1}, Dims{7, 5}, Dims{1000, 1003}};
    std::vector<DType> dtypes{DType::kF32, DType::kBF16, DType::kI8};
    if (light()) {
      if (m.size() > 1) continue;
      shapes = {Dims{1, 1}, Dims{7, 5}, Dims{64, 33}};
      dtypes = {DType::kBF16};
    }
    for (const Dims& shape : shapes) {
      for (const auto& from : testing::all_placements(mesh.ndim(), 2)) {
        for (const auto& to : testing::all_placements(mesh.ndim(), 2)) {
          for (DType t : dtypes) {
            for (const Plan& plan : plans_for(Layout(mesh, from, shape), Layout(mesh, to, shape), t)) check(plan);
          }
        }
      }
    }
  }
}

// Ranks as threads of this process pulling (ExecutorOptions::one_sided_copies; every other in-process test pushes,
// the default): every pair of R/S0/S1/P(sum) on mesh (2), the nvlink p2p plan with separate copies (kernels read the
// peers' tensors: the copy engines cannot, docs/transports.md), every element.
TEST_F(Gpu, NvlinkStepsPulledAsKernelsEveryPair) {
  const Mesh mesh({2});
  const std::vector<Placement> options{Placement::replicate(), Placement::shard(0), Placement::shard(1),
                                       Placement::partial()};
  RunOptions o = quick();
  o.one_sided_copies = OneSidedCopies::kPull;
  for (const Dims& shape : light() ? std::vector<Dims>{Dims{1, 1}, Dims{7, 5}, Dims{64, 33}}
                                   : std::vector<Dims>{Dims{0, 4}, Dims{1, 1}, Dims{7, 5}, Dims{1000, 1003}}) {
    for (const auto& from : testing::placement_lists(1, options)) {
      for (const auto& to : testing::placement_lists(1, options)) {
        PlanOptions po;
        po.strategy = Strategy::kP2P;
        po.transport = Transport::kNvlink;
        po.fusion = Fusion::kNever;
        check(make_plan(Layout(mesh, from, shape), Layout(mesh, to, shape), DType::kF32, po), o);
      }
    }
  }
}

TEST_F(Gpu, EveryDType) {
  Mesh mesh({2});
  for (const char* pair : {"S0>S1", "S1>S0", "S0>R", "R>S1", "S1>R"}) {
    std::string p(pair);
    auto gt = p.find('>');
    for (const Dims& shape : light() ? std::vector<Dims>{Dims{3, 5}, Dims{64, 3, 7}}
                                     : std::vector<Dims>{Dims{3, 5}, Dims{4099, 257}, Dims{64, 3, 7}}) {
      Layout src(mesh, parse_placements(p.substr(0, gt)), shape), dst(mesh, parse_placements(p.substr(gt + 1)), shape);
      for (DType t : kAllDTypes)
        for (const Plan& plan : plans_for(src, dst, t)) check(plan);
    }
  }
}

// Partial sources and targets over NCCL: every pair of R, S0, S1 and P(op) for every op, every available strategy
// (the p2p reduction runs in the CUDA unpack kernel), exact for integers, within partial_tolerance for floats.
// Mesh (2) over shapes and dtypes; meshes (1,2) and (2,1) (size-1 dims) on one small shape.
TEST_F(Gpu, PartialEveryPairAndStrategy) {
  struct Sweep {
    std::vector<int> mesh;
    std::vector<Dims> shapes;
    std::vector<DType> dtypes;
  };
  std::vector<Sweep> sweeps{
      {{2}, {Dims{1, 1}, Dims{7, 5}, Dims{1000, 1003}}, {DType::kF32, DType::kBF16, DType::kI32, DType::kF16}},
      {{1, 2}, {Dims{7, 5}}, {DType::kF32}},
      {{2, 1}, {Dims{7, 5}}, {DType::kI32}}};
  std::vector<ReduceOp> ops{ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin};
  if (light()) {
    sweeps = {{{2}, {Dims{7, 5}, Dims{64, 33}}, {DType::kF32, DType::kBF16}}, {{1, 2}, {Dims{7, 5}}, {DType::kF32}}};
    ops = {ReduceOp::kSum, ReduceOp::kMax};
  }
  for (ReduceOp op : ops) {
    for (const Sweep& sw : sweeps) {
      Mesh mesh(sw.mesh);
      std::vector<std::vector<Placement>> all{{}};
      for (int k = 0; k < mesh.ndim(); ++k) {
        std::vector<std::vector<Placement>> next;
        for (const auto& p : all)
          for (Placement q :
               {Placement::replicate(), Placement::shard(0), Placement::shard(1), Placement::partial(op)}) {
            next.push_back(p);
            next.back().push_back(q);
          }
        all = std::move(next);
      }
      for (const Dims& shape : sw.shapes)
        for (const auto& from : all)
          for (const auto& to : all) {
            bool partial = false;
            for (const auto* ps : {&from, &to})
              for (const Placement& p : *ps) partial = partial || p.is_partial();
            if (!partial) continue;
            for (DType t : sw.dtypes)
              for (const Plan& plan : plans_for(Layout(mesh, from, shape), Layout(mesh, to, shape), t)) check(plan);
          }
    }
  }
}

// A memory budget of 1/8 of the received bytes: the executor's workspace (measured) stays within it.
TEST_F(Gpu, MemoryBudgetIsHonoured) {
  Mesh mesh({2});
  const Dims shape = light() ? Dims{256, 192} : Dims{4096, 4096};
  for (const char* pair : {"S0>S1", "P>S0", "S1>S0"}) {
    std::string p(pair);
    auto gt = p.find('>');
    Layout src(mesh, parse_placements(p.substr(0, gt)), shape), dst(mesh, parse_placements(p.substr(gt + 1)), shape);
    PlanOptions o;
    const Index received = shape[0] * shape[1] * 4 / 4;  // S0 -> S1: a quarter of the tensor crosses into a rank
    o.memory_budget_bytes = received / 8;
    Plan plan = make_plan(src, dst, DType::kF32, o);
    RunResult r = check(plan);
    EXPECT_LE(static_cast<Index>(r.workspace_bytes), received / 8) << pair;
    RunOptions serial = quick();
    serial.stage_overlap = StageOverlap::kSerial;
    check(plan, serial);
  }
}

TEST_F(Gpu, OneGiBTensors) {
  if (light()) GTEST_SKIP() << "light mode";
  Mesh mesh({2});
  RunOptions o;
  o.warmup = 1;
  o.iters = 3;
  for (const char* pair : {"S0>S1", "S1>S0", "S0>R", "R>S0"}) {
    std::string p(pair);
    auto gt = p.find('>');
    Dims shape{16384, 16384};  // f32: 1 GiB
    Layout src(mesh, parse_placements(p.substr(0, gt)), shape), dst(mesh, parse_placements(p.substr(gt + 1)), shape);
    for (const Plan& plan : plans_for(src, dst, DType::kF32)) {
      RunResult r = check(plan, o);
      std::printf("  1 GiB f32 %-6s %-10s %9.1f us\n", pair, std::string(to_string(plan.strategy())).c_str(),
                  r.median_us);
    }
  }
  Layout src(mesh, parse_placements("S0"), Dims{16384, 32768});  // bf16: 1 GiB
  for (const Plan& plan : plans_for(src, src.with_placements(parse_placements("S1")), DType::kBF16)) check(plan, o);
}

TEST_F(Gpu, CudaGraphCaptureAndReplay) {
  RunOptions o;
  o.warmup = 2;
  o.iters = 10;
  o.cuda_graph = true;
  for (std::vector<int> m : {std::vector<int>{2}, {1, 2}, {2, 1}}) {
    Mesh mesh(m);
    for (const auto& [from, to] : {std::pair{"S0", "S1"}, std::pair{"S1", "R"}, std::pair{"R", "S0"}}) {
      std::vector<Placement> pf(mesh.ndim(), Placement::replicate()), pt = pf;
      pf.back() = parse_placement(from);
      pt.back() = parse_placement(to);
      Layout src(mesh, pf, Dims{1024, 777});
      for (const Plan& plan : plans_for(src, src.with_placements(pt), DType::kBF16)) check(plan, o);
    }
  }
}

TEST_F(Gpu, ZeroCopyPathsSendAndReceiveInPlace) {
  Plan plan = testing::p2p_over_nccl(Layout(Mesh({2}), parse_placements("S0"), Dims{4096, 1024}), "R", DType::kF32);
  for (int r = 0; r < 2; ++r) {
    RankProgram p = lower(plan, r);
    const Exchange* x = nullptr;
    for (const Op& op : p.ops) {
      if (const auto* c = std::get_if<Copies>(&op.body)) {
        EXPECT_EQ(c->regions.size(), 1u);  // the local block only
      }
      if (const auto* e = std::get_if<Exchange>(&op.body)) x = e;
    }
    ASSERT_NE(x, nullptr);
    EXPECT_EQ(x->sends[0].buffer.buffer, Buffer::kInput);
    EXPECT_EQ(x->recvs[0].buffer.buffer, Buffer::kOutput);
  }
  check(plan);
}

TEST_F(Gpu, HostPointersAreRejected) {
  auto comms = make_local_communicators(2, NcclOptions{std::chrono::seconds(30)});
  Layout src(Mesh({2}), parse_placements("S0"), Dims{64, 64});
  PlanOptions po;  // p2p over NCCL: no collective at construction (an nvlink plan connects its peers collectively)
  po.strategy = Strategy::kP2P;
  po.transport = Transport::kNccl;
  Plan plan = make_plan(src, src.with_placements(parse_placements("S1")), DType::kF32, po);
  CudaDevice device(0);
  Executor exec(plan, *comms[0], device);
  std::vector<std::byte> host_in(exec.input_bytes()), host_out(exec.output_bytes());
  try {
    exec.run({host_in.data(), host_in.size()}, {host_out.data(), host_out.size()}, nullptr);
    FAIL() << "accepted host memory";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("not device memory"), std::string::npos) << e.what();
  }
}

TEST_F(Gpu, ARankThatNeverPostsTimesOutAndAborts) {
  auto comms = make_local_communicators(2, NcclOptions{std::chrono::seconds(5)});
  Layout src(Mesh({2}), parse_placements("S0"), Dims{1024, 1024});
  PlanOptions po;
  po.strategy = Strategy::kP2P;
  Plan plan = make_plan(src, src.with_placements(parse_placements("S1")), DType::kF32, po);
  std::atomic<bool> rank0_done{false};
  ErrorKind kind = ErrorKind::kInternal;
  std::string message;
  auto start = std::chrono::steady_clock::now();
  std::thread rank1([&] {
    CudaDevice device(1);
    Executor exec(plan, *comms[1], device);  // prepares, but never runs its part
    while (!rank0_done) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  });
  {
    CudaDevice device(0);
    CudaStream stream(0);
    Executor exec(plan, *comms[0], device, ExecutorOptions{std::chrono::seconds(3)});
    auto in = device.allocate(exec.input_bytes()), out = device.allocate(exec.output_bytes());
    try {
      exec.run({in->data(), in->bytes()}, {out->data(), out->bytes()}, stream.handle());
      exec.wait(stream.handle());
    } catch (const Error& e) {
      kind = e.kind();
      message = e.what();
    }
  }
  rank0_done = true;
  rank1.join();
  comms[1]->abort();  // as a runtime would once a peer has failed
  EXPECT_EQ(kind, ErrorKind::kTimeout) << message;
  EXPECT_NE(message.find("aborted"), std::string::npos) << message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

// One-sided (nvlink) steps: a peer that stops calling run() leaves this rank waiting on its ready flag on the GPU;
// wait() times out, releases the stream (no endless wait) and reports it.
TEST_F(Gpu, NvlinkPeerThatStopsArrivingTimesOut) {
  auto comms = make_local_communicators(2, NcclOptions{std::chrono::seconds(20)});
  Layout src(Mesh({2}), parse_placements("S0"), Dims{1024, 1024});
  PlanOptions po;
  po.strategy = Strategy::kP2P;
  po.transport = Transport::kNvlink;
  po.fusion = Fusion::kNever;  // the stream-operation flags, whose pending waits the timeout names
  Plan plan = make_plan(src, src.with_placements(parse_placements("S1")), DType::kF32, po);
  ASSERT_EQ(plan.steps()[0].transport, Transport::kNvlink);
  std::atomic<int> stage{0};
  ErrorKind kind = ErrorKind::kInternal;
  std::string message;
  auto start = std::chrono::steady_clock::now();
  std::thread rank1([&] {
    CudaDevice device(1);
    CudaStream stream(1);
    Executor exec(plan, *comms[1], device, ExecutorOptions{std::chrono::seconds(3)});
    auto in = device.allocate(exec.input_bytes()), out = device.allocate(exec.output_bytes());
    exec.run({in->data(), in->bytes()}, {out->data(), out->bytes()}, stream.handle());  // one run, then it stops
    exec.wait(stream.handle());
    stage = 1;
    while (stage != 2) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  });
  {
    CudaDevice device(0);
    CudaStream stream(0);
    Executor exec(plan, *comms[0], device, ExecutorOptions{std::chrono::seconds(3)});
    auto in = device.allocate(exec.input_bytes()), out = device.allocate(exec.output_bytes());
    try {
      for (int i = 0; i < 2; ++i) {
        exec.run({in->data(), in->bytes()}, {out->data(), out->bytes()}, stream.handle());
        exec.wait(stream.handle());
      }
    } catch (const Error& e) {
      kind = e.kind();
      message = e.what();
    }
    stream.synchronize();  // released: the stream drains instead of waiting forever
  }
  while (stage != 1) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  stage = 2;
  rank1.join();
  EXPECT_EQ(kind, ErrorKind::kTimeout) << message;
  // Rank 1 posted once: rank 0's second run waits for its second ready post.
  EXPECT_NE(message.find("one-sided waits pending on rank 0: ready with rank 1: flag 1, awaited 2"), std::string::npos)
      << message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(40));
}

TEST_F(Gpu, OneProcessPerRank) {
  for (std::string rendezvous : {std::string("file:/tmp/reshard_mp_") + std::to_string(::getpid()),
                                 std::string("tcp:127.0.0.1:") + std::to_string(29500 + ::getpid() % 1000)}) {
    std::string base = "/tmp/reshard_mp_out_" + std::to_string(::getpid());
    std::string cmd, token = make_rendezvous_token();  // the job token a launcher gives every rank
    // The file rendezvous runs the nvlink transport (peers' memory through CUDA IPC), the tcp one nccl.
    const std::string transport = rendezvous.rfind("file:", 0) == 0 ? "nvlink" : "nccl";
    for (int r = 0; r < 2; ++r) {
      cmd += "(RESHARD_RENDEZVOUS_TOKEN=" + token + " RANK=" + std::to_string(r) +
             " WORLD_SIZE=2 LOCAL_RANK=" + std::to_string(r) + " " + testing::cli_path() +
             " run --mesh 2 --from S0 --to S1 --shape 8192x4096 --dtype bf16 --iters 5 --strategy p2p --transport " +
             transport + " --rendezvous " + rendezvous + " > " + base + std::to_string(r) + " 2>&1; echo $? > " + base +
             "rc" + std::to_string(r) + ") & ";
    }
    cmd += "wait";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    for (int r = 0; r < 2; ++r) {
      std::string rc = testing::read_file(base + "rc" + std::to_string(r));
      EXPECT_EQ(rc, "0\n") << testing::read_file(base + std::to_string(r));
    }
    std::string out0 = testing::read_file(base + "0");
    EXPECT_NE(out0.find("all correct"), std::string::npos) << out0;
    EXPECT_NE(out0.find("2 ranks, nccl backend"), std::string::npos) << out0;
    std::printf("%s", out0.c_str());
    if (rendezvous.rfind("file:", 0) == 0) std::remove(rendezvous.substr(5).c_str());
  }
}

TEST_F(Gpu, ARankProcessThatDiesMakesTheOthersFailWithinTheTimeout) {
  for (const char* point : {"after-prepare", "mid-run"}) {
    std::string base = "/tmp/reshard_fault_" + std::to_string(::getpid());
    std::string rendezvous = "file:" + base + "_id_" + point;
    const std::string transport = std::string(point) == "mid-run" ? "nvlink" : "nccl";
    std::string cmd = "cd /tmp && ", token = make_rendezvous_token();
    for (int r = 0; r < 2; ++r) {
      cmd +=
          "(RESHARD_RENDEZVOUS_TOKEN=" + token + " RANK=" + std::to_string(r) +
          " WORLD_SIZE=2 LOCAL_RANK=" + std::to_string(r) + " timeout 90 " + testing::cli_path() +
          " run --mesh 2 --from S0 --to S1 --shape 4096x4096 --iters 5 --timeout-ms 5000 --strategy p2p --transport " +
          transport + " --inject-fault 1:" + point + " --rendezvous " + rendezvous + " > " + base + std::to_string(r) +
          " 2>&1; echo $? > " + base + "rc" + std::to_string(r) + ") & ";
    }
    cmd += "wait";
    auto start = std::chrono::steady_clock::now();
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::string rc0 = testing::read_file(base + "rc0"), rc1 = testing::read_file(base + "rc1");
    std::string out0 = testing::read_file(base + "0");
    EXPECT_EQ(rc1, "3\n") << testing::read_file(base + "1");  // the injected crash
    EXPECT_NE(rc0, "0\n") << out0;                            // the survivor fails ...
    EXPECT_NE(rc0, "124\n") << out0;                          // ... by itself, not killed by `timeout`
    EXPECT_LT(seconds, 60) << out0;
    EXPECT_TRUE(out0.find("timed out") != std::string::npos || out0.find("aborted") != std::string::npos ||
                out0.find("did not") != std::string::npos || out0.find("blocked") != std::string::npos)
        << out0;
    size_t at = out0.rfind("reshard run");
    std::printf("fault %s: survivor exited %s after %.1f s: %s", point, rc0.c_str(), seconds,
                out0.substr(at == std::string::npos ? 0 : at).c_str());
    std::remove(rendezvous.substr(5).c_str());
  }
}

// A communicator the caller owns is never aborted by reshard: a timeout raises the error, leaves the communicator
// usable, and says so (issue 18). The stream is held by a host function until the timeout has fired.
TEST(GpuNccl, CallersCommunicatorSurvivesATimeout) {
  if (local_gpu_count() < 2) GTEST_SKIP() << "needs 2 GPUs";
  ncclComm_t comms[2];
  int devices[2] = {0, 1};
  ASSERT_EQ(ncclCommInitAll(comms, 2, devices), ncclSuccess);
  std::atomic<bool> release{false};
  {
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    NcclOptions options;
    options.timeout = std::chrono::milliseconds(200);
    NcclCommunicator wrapped(comms[0], /*owned=*/false, options);
    cudaStream_t s;
    ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    auto hold = [](void* flag) {
      while (!static_cast<std::atomic<bool>*>(flag)->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    };
    ASSERT_EQ(cudaLaunchHostFunc(s, hold, &release), cudaSuccess);
    try {
      wrapped.wait(s, std::chrono::milliseconds(200));
      ADD_FAILURE() << "wait() returned while the stream was held";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kTimeout);
      EXPECT_NE(std::string(e.what()).find("left as it is"), std::string::npos) << e.what();
    }
    release = true;
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  }
  // Not aborted: both ranks still all-reduce correctly over it.
  ncclResult_t state = ncclSuccess;
  ASSERT_EQ(ncclCommGetAsyncError(comms[0], &state), ncclSuccess);
  EXPECT_EQ(state, ncclSuccess);
  float* buf[2];
  cudaStream_t streams[2];
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&buf[r], 1024 * sizeof(float)), cudaSuccess);
    std::vector<float> v(1024, static_cast<float>(r + 1));
    ASSERT_EQ(cudaMemcpy(buf[r], v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaStreamCreate(&streams[r]), cudaSuccess);
  }
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; ++r)
    ASSERT_EQ(ncclAllReduce(buf[r], buf[r], 1024, ncclFloat, ncclSum, comms[r], streams[r]), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(streams[r]), cudaSuccess);
    std::vector<float> v(1024);
    ASSERT_EQ(cudaMemcpy(v.data(), buf[r], v.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    for (float x : v) ASSERT_EQ(x, 3.0f);
    cudaFree(buf[r]);
    cudaStreamDestroy(streams[r]);
  }
  for (ncclComm_t c : comms) ncclCommDestroy(c);
}

}  // namespace
}  // namespace reshard
