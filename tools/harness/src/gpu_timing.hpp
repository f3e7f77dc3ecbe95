// The GPU side of the harness's one timing helper (timing.hpp): back-to-back work on one CUDA stream timed with a
// fixed ring of CUDA events. Iteration i takes the interval between the events recorded after iterations i - 1 and
// i (`issue_us`, when given, receives the host's mean time per iteration in `work` and the event record). At most
// kRing - 1 iterations are in flight: before an event is reused the host polls for it (poll_until), so a
// stop request ends the loop, and a stall longer than `timeout` calls `stalled` (which should throw, e.g. by letting
// the communicator abort itself) instead of blocking forever in a full launch queue.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "reshard/cuda_check.hpp"
#include "reshard/cuda_device.hpp"
#include "reshard/interrupt.hpp"
#include "reshard/timing.hpp"

namespace reshard::detail {

inline constexpr int kEventRing = 64;

// Waits (polling) until `event` completed; calls `stalled` each time `timeout` passes without it.
inline void wait_event(const CudaEvent& event, std::chrono::milliseconds timeout,
                       const std::function<void()>& stalled) {
  auto complete = [&] {
    cudaError_t q = cudaEventQuery(event.get());
    if (q == cudaErrorNotReady) return false;
    RESHARD_CUDA_CHECK(q);
    return true;
  };
  while (!poll_until(complete, timeout, std::chrono::microseconds(20))) stalled();
}

template <class Work>
IterationSamples time_on_stream(cudaStream_t stream, int iters, Work&& work, std::chrono::milliseconds timeout,
                                const std::function<void()>& stalled, double* issue_us = nullptr) {
  std::vector<std::unique_ptr<CudaEvent>> ring;
  for (int k = 0; k < kEventRing; ++k) ring.push_back(std::make_unique<CudaEvent>());
  auto slot = [&](long long j) -> CudaEvent& { return *ring[static_cast<size_t>(j % kEventRing)]; };
  IterationSamples samples;
  long long harvested = 0;
  auto harvest = [&] {  // iteration h: from event h - 1 to event h
    const long long h = ++harvested;
    wait_event(slot(h), timeout, stalled);
    samples.add(1000.0 * slot(h).elapsed_ms_since(slot(h - 1)));
  };
  using Clock = std::chrono::steady_clock;
  Clock::duration issuing{};
  slot(0).record(stream);
  for (long long j = 1; j <= iters; ++j) {
    throw_if_stop_requested();
    while (harvested < j - kEventRing + 1) harvest();  // event j reuses event j - kEventRing's slot
    const Clock::time_point t0 = Clock::now();
    work();
    slot(j).record(stream);
    issuing += Clock::now() - t0;
  }
  while (harvested < iters) harvest();
  if (issue_us && iters > 0) *issue_us = std::chrono::duration<double, std::micro>(issuing).count() / iters;
  return samples;
}

}  // namespace reshard::detail
