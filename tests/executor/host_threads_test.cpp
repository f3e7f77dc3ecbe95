// The host backend when rank threads cannot be created (a thread or address-space limit): an error naming the rank,
// never std::terminate; and its rank cap.
#include <gtest/gtest.h>

#include <atomic>
#include <system_error>

#include "reshard/host_backend.hpp"

namespace reshard {
namespace {

TEST(HostThreads, ThreadCreationFailureIsAnErrorAndNoRankRuns) {
  std::atomic<int> ran{0}, started{0};
  HostWorld world(8);
  // The system refuses the fourth thread, as under `ulimit -u` or a 2 GB address space.
  ThreadStarter flaky = [&](std::function<void()> body) {
    if (started++ == 3) throw std::system_error(EAGAIN, std::generic_category(), "pthread_create");
    return std::thread(std::move(body));
  };
  try {
    run_ranks(
        8, [&](int) { ++ran; }, &world, flaky);
    ADD_FAILURE() << "no error although a thread could not start";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBackend);
    EXPECT_NE(std::string(e.what()).find("cannot start the thread of host rank 3 of 8"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ran.load(), 0) << "ranks ran although their peers never started";
  // The same world and function run fine once threads can be created.
  run_ranks(
      8, [&](int) { ++ran; }, &world);
  EXPECT_EQ(ran.load(), 8);
}

// A stall is a cycle of waits: the error of the first rank that timed out quotes what the others waited for, and a
// failure of another kind is rethrown as it is.
TEST(HostThreads, ATimeoutQuotesEveryRanksTimeout) {
  try {
    run_ranks(3, [](int r) {
      if (r != 1) fail(ErrorKind::kTimeout, cat("rank ", r, " waited for ", (r + 1) % 3));
    });
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kTimeout);
    EXPECT_EQ(std::string(e.what()), "rank 0 waited for 1 | also rank 2 waited for 0");
  }
  try {
    run_ranks(2, [](int r) { fail(r == 0 ? ErrorKind::kInvalidArgument : ErrorKind::kTimeout, cat("rank ", r)); });
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_EQ(std::string(e.what()), "rank 0");
  }
}

TEST(HostThreads, RankCountIsCapped) {
  for (int n : {0, kMaxHostRanks + 1, 1 << 30}) {
    try {
      HostWorld world(n);
      ADD_FAILURE() << n;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("the host backend runs 1 to 1024 ranks"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(run_ranks(kMaxHostRanks + 1, [](int) {}), Error);
}

}  // namespace
}  // namespace reshard
