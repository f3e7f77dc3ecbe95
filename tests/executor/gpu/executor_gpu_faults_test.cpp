// The executor on GPUs when something goes wrong (skipped where fewer than 2 GPUs are visible): host pointers, a rank
// that never posts or stops arriving (timeouts that release the stream), a caller's communicator left usable.
#include <gtest/gtest.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gpu_fixture.hpp"
#include "reshard/cuda_device.hpp"
#include "reshard/executor.hpp"
#include "reshard/harness.hpp"
#include "reshard/nccl_communicator.hpp"
#include "reshard/planner.hpp"

namespace reshard {
namespace {

using testing::Gpu;

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
