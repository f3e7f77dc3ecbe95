// Many tensors in one call on the host backend: a PlanBatch of mixed dtypes and layouts, one executor, one run().
#include <atomic>
#include <cstdio>
#include <vector>

#include "reshard/executor.hpp"
#include "reshard/host_backend.hpp"
#include "reshard/pattern.hpp"
#include "reshard/plan_batch.hpp"

int main() {
  using namespace reshard;
  Mesh mesh({2, 2});
  std::vector<BatchEntry> entries;
  for (int i = 0; i < 8; ++i) {  // eight weights, S0,S1 -> S1,S0, alternating bf16 and f32
    Layout src(mesh, parse_placements("S0,S1"), Dims{64, 48 + 8 * i});
    entries.push_back({src, src.with_placements(parse_placements("S1,S0")), i % 2 ? DType::kF32 : DType::kBF16});
  }
  Layout bias(mesh, parse_placements("P,R"), Dims{100});  // a Partial(sum) bias, reduced and sharded
  entries.push_back({bias, bias.with_placements(parse_placements("S0,R")), DType::kF32});
  PlanBatch batch = make_plan_batch(entries);  // each tensor planned as alone; transport auto runs on NCCL

  HostWorld world(mesh.size());  // the ranks: threads of this process
  std::atomic<Index> wrong{0};   // over every rank and tensor
  run_ranks(
      mesh.size(),
      [&](int rank) {
        HostCommunicator comm(world, rank);
        HostDevice device;
        Executor exec(batch, comm, device);  // one merged program: each step one exchange for every tensor
        std::vector<std::vector<std::byte>> in(batch.size()), out(batch.size());
        std::vector<ConstBuffer> inputs;
        std::vector<MutableBuffer> outputs;
        for (size_t t = 0; t < batch.size(); ++t) {
          const Plan& plan = batch.plan(t);
          in[t].resize(exec.input_bytes(t));
          out[t].resize(exec.output_bytes(t));
          fill_local(in[t].data(), plan.src(), rank, plan.dtype());  // the test pattern (a contribution where Partial)
          inputs.push_back({in[t].data(), in[t].size()});
          outputs.push_back({out[t].data(), out[t].size()});
        }
        exec.run(inputs, outputs, nullptr);  // every tensor, one call
        exec.wait(nullptr);
        for (size_t t = 0; t < batch.size(); ++t)
          wrong += count_local_mismatches(out[t].data(), batch.plan(t).src(), batch.plan(t).dst(), rank,
                                          batch.plan(t).dtype());
      },
      &world);
  std::printf("a batch of %zu tensors in %d steps; wrong elements: %lld\n", batch.size(), batch.step_count(),
              static_cast<long long>(wrong.load()));
  return wrong == 0 ? 0 : 1;
}
