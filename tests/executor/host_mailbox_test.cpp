// detail::HostMailbox, the shared-memory host all-gather: ranks as threads and as processes, every byte of every
// rank's records checked on every call; timeouts, a stopped caller, refused names and arguments.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "expect_error.hpp"
#include "reshard/detail/host_mailbox.hpp"
#include "reshard/error.hpp"
#include "reshard/host_backend.hpp"

namespace reshard {
namespace {

using detail::HostMailbox;
using testing::expect_error;
using namespace std::chrono_literals;

// The record rank r sends in call c: `bytes` bytes that differ by rank, call and position.
std::vector<unsigned char> record_of(int r, int c, size_t bytes) {
  std::vector<unsigned char> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = static_cast<unsigned char>(r * 131 + c * 7 + i * 13 + (i >> 8));
  return v;
}

// `calls` all-gathers whose sizes vary with the call (0 to capacity); the count of wrong bytes over all of them.
size_t exchange_and_count_wrong(HostMailbox& box, int calls) {
  size_t wrong = 0;
  const int n = box.size();
  for (int c = 0; c < calls; ++c) {
    const size_t bytes = static_cast<size_t>(c * 37) % (box.capacity() + 1);
    const std::vector<unsigned char> mine = record_of(box.rank(), c, bytes);
    std::vector<unsigned char> all(bytes * static_cast<size_t>(n), 0xEE);
    box.all_gather(mine.data(), all.data(), bytes, 10s);
    for (int r = 0; r < n; ++r) {
      const std::vector<unsigned char> want = record_of(r, c, bytes);
      for (size_t i = 0; i < bytes; ++i) wrong += all[static_cast<size_t>(r) * bytes + i] != want[i];
    }
  }
  return wrong;
}

// Runs fn(rank) on `n` threads; rethrows the first exception.
template <class Fn>
void on_threads(int n, Fn fn) {
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

HostMailbox::Gather gather_over(HostCommunicator& comm) {
  return [&comm](const void* s, void* r, size_t b) { comm.all_gather_host(s, r, b); };
}

TEST(HostMailbox, ThreadsGatherEveryRecordOfEveryCall) {
  for (int n : {1, 2, 3, 8}) {
    HostWorld world(n);
    std::vector<size_t> wrong(static_cast<size_t>(n), 1);
    on_threads(n, [&](int r) {
      HostCommunicator comm(world, r);
      auto box = HostMailbox::connect(r, n, 300, gather_over(comm));
      ASSERT_NE(box, nullptr);
      wrong[static_cast<size_t>(r)] = exchange_and_count_wrong(*box, 2000);
    });
    for (int r = 0; r < n; ++r) EXPECT_EQ(wrong[static_cast<size_t>(r)], 0u) << n << " ranks, rank " << r;
  }
}

// Setup for processes: rank 0 relays through pipes (every rank's bytes to rank 0, the whole array back).
struct PipeGather {
  int n;
  std::vector<std::array<int, 2>> up, down;  // rank r -> 0, 0 -> rank r
  explicit PipeGather(int size) : n(size), up(static_cast<size_t>(size)), down(static_cast<size_t>(size)) {
    for (int r = 1; r < n; ++r) {
      EXPECT_EQ(::pipe(up[static_cast<size_t>(r)].data()), 0);
      EXPECT_EQ(::pipe(down[static_cast<size_t>(r)].data()), 0);
    }
  }
  static void full(int fd, void* p, size_t b, bool write) {
    auto* c = static_cast<char*>(p);
    while (b > 0) {
      const ssize_t k = write ? ::write(fd, c, b) : ::read(fd, c, b);
      if (k <= 0) throw Error(ErrorKind::kBackend, "pipe gather failed");
      c += k;
      b -= static_cast<size_t>(k);
    }
  }
  HostMailbox::Gather for_rank(int rank) {
    return [this, rank](const void* s, void* recv, size_t b) {
      auto* all = static_cast<char*>(recv);
      if (rank == 0) {
        std::memcpy(all, s, b);
        for (int r = 1; r < n; ++r) full(up[static_cast<size_t>(r)][0], all + static_cast<size_t>(r) * b, b, false);
        for (int r = 1; r < n; ++r) full(down[static_cast<size_t>(r)][1], all, b * static_cast<size_t>(n), true);
      } else {
        full(up[static_cast<size_t>(rank)][1], const_cast<void*>(s), b, true);
        full(down[static_cast<size_t>(rank)][0], all, b * static_cast<size_t>(n), false);
      }
    };
  }
};

TEST(HostMailbox, ProcessesGatherEveryRecordOfEveryCall) {
  constexpr int n = 4;
  PipeGather pipes(n);
  std::vector<pid_t> children;
  for (int r = 1; r < n; ++r) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {  // a child rank: exit code 0 only when every byte was right
      int code = 3;
      try {
        auto box = HostMailbox::connect(r, n, 1000, pipes.for_rank(r));
        code = !box ? 2 : exchange_and_count_wrong(*box, 2000) == 0 ? 0 : 1;
      } catch (...) {
        code = 4;
      }
      ::_exit(code);
    }
    children.push_back(pid);
  }
  auto box = HostMailbox::connect(0, n, 1000, pipes.for_rank(0));
  ASSERT_NE(box, nullptr);
  EXPECT_EQ(exchange_and_count_wrong(*box, 2000), 0u);
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "a child rank's exit code (1: wrong bytes, 2: no mailbox, 4: an error)";
  }
}

TEST(HostMailbox, TimeoutNamesTheMissingRankAndLaterCallsFailAtOnce) {
  HostWorld world(3);
  std::atomic<int> done{0};
  on_threads(3, [&](int r) {
    HostCommunicator comm(world, r);
    auto box = HostMailbox::connect(r, 3, 64, gather_over(comm));
    ASSERT_NE(box, nullptr);
    int x = r, all[3] = {};
    box->all_gather(&x, all, sizeof x, 10s);  // a first call everyone makes
    EXPECT_EQ(all[0] + all[1] + all[2], 3);
    if (r == 2) {  // rank 2 stops here; the others' second call times out naming it
      ++done;
      return;
    }
    expect_error([&] { box->all_gather(&x, all, sizeof x, 50ms); }, ErrorKind::kTimeout, "rank(s) 2");
    // a call after a timeout does not go through
    expect_error([&] { box->all_gather(&x, all, sizeof x, 10s); }, ErrorKind::kBackend, "waited");
    ++done;
  });
  EXPECT_EQ(done.load(), 3);
}

TEST(HostMailbox, StopGivesUpWithoutWaitingForTheTimeout) {
  HostWorld world(2);
  on_threads(2, [&](int r) {
    HostCommunicator comm(world, r);
    auto box = HostMailbox::connect(r, 2, 64, gather_over(comm));
    ASSERT_NE(box, nullptr);
    if (r == 1) return;
    const auto start = std::chrono::steady_clock::now();
    int x = 0, all[2] = {};
    expect_error([&] { box->all_gather(&x, all, sizeof x, 60s, [] { return true; }); }, ErrorKind::kBackend, "aborted");
    EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  });
}

// A rank that receives anything but a name rank 0 would make refuses it before shm_open; then every rank returns
// null, and rank 0's segment is unlinked (its name no longer opens).
TEST(HostMailbox, ForeignNamesAreRefusedOnEveryRankAndNothingIsLeft) {
  for (const char* forged : {"/etc/passwd", "/reshard-mailbox-../../../../tmp/x", "/reshard-mailbox-0123",
                             "/reshard-mailbox-0123456789abcdef0123456789ABCDEF", ""}) {
    HostWorld world(2);
    std::string created;
    std::vector<bool> null(2, false);
    on_threads(2, [&](int r) {
      HostCommunicator comm(world, r);
      int gathers = 0;
      auto gather = [&](const void* s, void* recv, size_t b) {
        comm.all_gather_host(s, recv, b);
        if (gathers++ != 0) return;
        if (r == 0) created = static_cast<const char*>(recv);
        if (r == 1) {  // rank 1 sees a forged name instead of rank 0's
          std::memset(recv, 0, b);
          std::strncpy(static_cast<char*>(recv), forged, b - 1);
        }
      };
      null[static_cast<size_t>(r)] = HostMailbox::connect(r, 2, 64, gather) == nullptr;
    });
    EXPECT_TRUE(null[0] && null[1]) << forged;
    ASSERT_FALSE(created.empty());
    errno = 0;
    EXPECT_LT(::shm_open(created.c_str(), O_RDWR, 0), 0) << created << " is still there";
    EXPECT_EQ(errno, ENOENT);
  }
}

TEST(HostMailbox, SuccessLeavesNoNameBehind) {
  HostWorld world(2);
  std::string created;
  on_threads(2, [&](int r) {
    HostCommunicator comm(world, r);
    int gathers = 0;
    auto gather = [&](const void* s, void* recv, size_t b) {
      comm.all_gather_host(s, recv, b);
      if (gathers++ == 0 && r == 0) created = static_cast<const char*>(recv);
    };
    auto box = HostMailbox::connect(r, 2, 64, gather);
    ASSERT_NE(box, nullptr);
  });
  ASSERT_EQ(created.rfind("/reshard-mailbox-", 0), 0u) << created;
  EXPECT_LT(::shm_open(created.c_str(), O_RDWR, 0), 0);
}

TEST(HostMailbox, RefusesArgumentsOutOfRange) {
  auto none = [](const void*, void*, size_t) { FAIL() << "gather called"; };
  for (auto [rank, size, capacity] :
       std::vector<std::tuple<int, int, size_t>>{{0, 0, 64},
                                                 {0, HostMailbox::kMaxRanks + 1, 64},
                                                 {2, 2, 64},
                                                 {-1, 2, 64},
                                                 {0, 2, 0},
                                                 {0, 2, HostMailbox::kMaxRecordBytes + 1}}) {
    SCOPED_TRACE(::testing::Message() << "rank " << rank << ", size " << size << ", capacity " << capacity);
    expect_error([&] { HostMailbox::connect(rank, size, capacity, none); }, ErrorKind::kInvalidArgument);
  }
  HostWorld world(1);
  HostCommunicator comm(world, 0);
  auto box = HostMailbox::connect(0, 1, 16, gather_over(comm));
  ASSERT_NE(box, nullptr);
  char big[17] = {}, all[17] = {};
  // 17 bytes into a 16-byte mailbox
  expect_error([&] { box->all_gather(big, all, sizeof big, 1s); }, ErrorKind::kInvalidArgument);
}

}  // namespace
}  // namespace reshard
