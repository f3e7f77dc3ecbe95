// The rendezvous (reshard/rendezvous.hpp) against hostile peers, on the CPU: stray and wrong-token connections never
// receive the payload and never take a rank's slot, the job still starts; a stale file is never used; rank 0 listens
// only on the address it was given.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <future>
#include <thread>

#include "reshard/error.hpp"
#include "reshard/rendezvous.hpp"
#include "sockets.hpp"

namespace reshard {
namespace {

using namespace std::chrono_literals;
using testing::free_port;
using testing::raw_connect;

// Everything a raw client receives until the other side closes (or 2 s pass).
std::string drain(int fd) {
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string got;
  char buf[256];
  ssize_t k;
  while ((k = ::recv(fd, buf, sizeof(buf), 0)) > 0) got.append(buf, static_cast<size_t>(k));
  ::close(fd);
  return got;
}

// A client that speaks the protocol (magic, version, world, rank) with the given token.
std::string hello(int world, int rank, const std::string& token) {
  std::string h("RSHDRNDZ");
  for (std::uint32_t v : {1u, static_cast<std::uint32_t>(world), static_cast<std::uint32_t>(rank),
                          static_cast<std::uint32_t>(token.size())})
    for (int i = 0; i < 4; ++i) h += static_cast<char>((v >> (8 * i)) & 0xFF);
  return h + token;
}

std::vector<std::byte> secret() {
  std::vector<std::byte> id(128);
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<std::byte>(0xC0 ^ i);
  return id;
}

bool contains_secret(const std::string& got) {
  std::vector<std::byte> s = secret();
  return got.find(std::string(reinterpret_cast<const char*>(s.data()), 16)) != std::string::npos;
}

RendezvousOptions quick(const std::string& token) {
  RendezvousOptions o;
  o.timeout = 10s;
  o.handshake_timeout = 300ms;
  o.token = token;
  return o;
}

TEST(Rendezvous, StrayAndWrongTokenClientsNeverGetTheIdAndTheJobStillStarts) {
  const int port = free_port();
  const std::string spec = "tcp:127.0.0.1:" + std::to_string(port);
  const std::vector<std::byte> id = secret();
  auto rank0 = std::async(std::launch::async, [&] { return rendezvous_publish(spec, 3, id, quick("job-token")); });
  // Before any rank: a silent client (holds a connection, sends nothing), a client sending junk, one with the wrong
  // token and one with the right token but a rank outside the world.
  int silent = raw_connect(port);
  int junk = raw_connect(port);
  int wrong = raw_connect(port);
  int outside = raw_connect(port);
  ASSERT_GE(silent, 0);
  ASSERT_GE(junk, 0);
  ASSERT_GE(wrong, 0);
  ASSERT_GE(outside, 0);
  ASSERT_GT(::send(junk, "GET / HTTP/1.0\r\n\r\n", 18, MSG_NOSIGNAL), 0);
  const std::string bad = hello(3, 1, "not-the-token"), far = hello(3, 7, "job-token");
  ASSERT_GT(::send(wrong, bad.data(), bad.size(), MSG_NOSIGNAL), 0);
  ASSERT_GT(::send(outside, far.data(), far.size(), MSG_NOSIGNAL), 0);
  // Rank 0 closes those two at once: the wrong token without a word, rank 7 with a refusal and no payload.
  EXPECT_EQ(drain(wrong), "");
  EXPECT_FALSE(contains_secret(drain(outside)));
  // The real ranks join while the silent and the junk connections are still open: neither waits for them.
  auto rank1 =
      std::async(std::launch::async, [&] { return rendezvous_fetch(spec, 3, 1, id.size(), quick("job-token")); });
  auto rank2 =
      std::async(std::launch::async, [&] { return rendezvous_fetch(spec, 3, 2, id.size(), quick("job-token")); });
  EXPECT_EQ(rank1.get(), id);
  EXPECT_EQ(rank2.get(), id);
  RendezvousStats stats = rank0.get();
  EXPECT_EQ(stats.joined, 2);
  EXPECT_GE(stats.dropped, 2);  // wrong token, rank 7 (silent and junk may still be pending when the job starts)
  for (int fd : {silent, junk}) EXPECT_FALSE(contains_secret(drain(fd)));
}

TEST(Rendezvous, AWrongTokenRankTimesOutSayingSo) {
  const int port = free_port();
  const std::string spec = "tcp:127.0.0.1:" + std::to_string(port);
  const std::vector<std::byte> id = secret();
  RendezvousOptions short_wait = quick("right");
  short_wait.timeout = 900ms;
  auto rank0 = std::async(std::launch::async, [&] {
    try {
      rendezvous_publish(spec, 2, id, short_wait);
      return std::string("published");
    } catch (const Error& e) {
      return std::string(e.what());
    }
  });
  RendezvousOptions wrong = quick("wrong");
  wrong.timeout = 600ms;
  try {
    rendezvous_fetch(spec, 2, 1, id.size(), wrong);
    ADD_FAILURE() << "a rank with the wrong token got the id";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kTimeout);
    EXPECT_NE(std::string(e.what()).find("RESHARD_RENDEZVOUS_TOKEN"), std::string::npos) << e.what();
  }
  const std::string r0 = rank0.get();
  EXPECT_NE(r0.find("only 0 of 1 ranks joined"), std::string::npos) << r0;
  EXPECT_NE(r0.find("dropped"), std::string::npos) << r0;
}

TEST(Rendezvous, ListensOnlyOnTheNamedAddress) {
  const int port = free_port();
  const std::string spec = "tcp:127.0.0.1:" + std::to_string(port);
  const std::vector<std::byte> id = secret();
  auto rank0 = std::async(std::launch::async, [&] { return rendezvous_publish(spec, 2, id, quick("t")); });
  int probe = raw_connect(port, "127.0.0.1");  // rank 0 is up
  ASSERT_GE(probe, 0);
  ::close(probe);
  // 127.0.0.2 is this host too, but not the address named: a socket bound to all interfaces would accept it.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = testing::ipv4("127.0.0.2", port);
  EXPECT_NE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ::close(fd);
  EXPECT_EQ(rendezvous_fetch(spec, 2, 1, id.size(), quick("t")), id);
  EXPECT_EQ(rank0.get().joined, 1);
}

// Rank 0 listens on every address the host name resolves to, or fails naming the one it cannot hold: with an
// impostor on 127.0.0.1:PORT, rank 0 of tcp:localhost:PORT fails at once instead of listening elsewhere while the
// other ranks send their token to the impostor.
TEST(Rendezvous, RankZeroHoldsEveryAddressOfTheNameOrFails) {
  const int port = free_port();
  int impostor = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = testing::ipv4("127.0.0.1", port);
  ASSERT_EQ(::bind(impostor, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(::listen(impostor, 4), 0);
  const std::vector<std::byte> id = secret();
  try {
    rendezvous_publish("tcp:localhost:" + std::to_string(port), 2, id, quick("t"));
    ADD_FAILURE() << "rank 0 started beside an impostor holding 127.0.0.1";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot listen on 127.0.0.1"), std::string::npos) << e.what();
  }
  ::close(impostor);
  // Without the impostor the same name works.
  const int free = free_port();
  const std::string spec = "tcp:localhost:" + std::to_string(free);
  auto rank0 = std::async(std::launch::async, [&] { return rendezvous_publish(spec, 2, id, quick("t")); });
  EXPECT_EQ(rendezvous_fetch(spec, 2, 1, id.size(), quick("t")), id);
  EXPECT_EQ(rank0.get().joined, 1);
}

TEST(Rendezvous, WorldSizeMismatchAndRepeatedRankAreClearErrors) {
  const int port = free_port();
  const std::string spec = "tcp:127.0.0.1:" + std::to_string(port);
  const std::vector<std::byte> id = secret();
  auto rank0 = std::async(std::launch::async, [&] { return rendezvous_publish(spec, 3, id, quick("t")); });
  try {
    rendezvous_fetch(spec, 4, 1, id.size(), quick("t"));
    ADD_FAILURE() << "joined a world of another size";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("runs a world of 3 ranks; this rank (1) expects 4"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(rendezvous_fetch(spec, 3, 1, id.size(), quick("t")), id);
  try {
    rendezvous_fetch(spec, 3, 1, id.size(), quick("t"));
    ADD_FAILURE() << "rank 1 served twice";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("already served rank 1"), std::string::npos) << e.what();
  }
  EXPECT_EQ(rendezvous_fetch(spec, 3, 2, id.size(), quick("t")), id);
  EXPECT_EQ(rank0.get().joined, 2);
}

std::string temp_path(const char* name) {
  return ::testing::TempDir() + "reshard_rdv_" + std::to_string(::getpid()) + "_" + name;
}

TEST(Rendezvous, AStaleFileIsNeverRead) {
  const std::string path = temp_path("stale");
  const std::vector<std::byte> old_id(128, std::byte{0x11}), id = secret();
  // An earlier job (another token) left its file; rank 1 of the new job starts first and must wait it out.
  ASSERT_NO_THROW(rendezvous_publish("file:" + path, 2, old_id, quick("earlier-job")));
  auto rank1 = std::async(std::launch::async,
                          [&] { return rendezvous_fetch("file:" + path, 2, 1, id.size(), quick("this-job")); });
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(rank1.wait_for(0ms), std::future_status::timeout) << "rank 1 took the stale file";
  rendezvous_publish("file:" + path, 2, id, quick("this-job"));
  EXPECT_EQ(rank1.get(), id);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::remove(path.c_str());
}

TEST(Rendezvous, FileRendezvousRefusesJunkAndNeedsAToken) {
  const std::string path = temp_path("junk");
  std::ofstream(path) << "not a rendezvous file";
  ::chmod(path.c_str(), 0600);
  RendezvousOptions o = quick("t");
  o.timeout = 300ms;
  try {
    rendezvous_fetch("file:" + path, 2, 1, 128, o);
    ADD_FAILURE() << "read a junk file";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kTimeout);
    EXPECT_NE(std::string(e.what()).find("not a reshard rendezvous file"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
  ::unsetenv(kRendezvousTokenEnv);
  try {
    rendezvous_publish("file:" + path, 2, secret(), RendezvousOptions{});
    ADD_FAILURE() << "published a file without a token";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("needs a job token"), std::string::npos) << e.what();
  }
  // The token may come from the environment.
  ::setenv(kRendezvousTokenEnv, "from-env", 1);
  rendezvous_publish("file:" + path, 2, secret(), RendezvousOptions{});
  EXPECT_EQ(rendezvous_fetch("file:" + path, 2, 1, 128, quick("from-env")), secret());
  ::unsetenv(kRendezvousTokenEnv);
  std::remove(path.c_str());
}

TEST(Rendezvous, BadSpecsAreClearErrors) {
  for (const char* spec : {"udp:1.2.3.4:5", "tcp:host", "tcp:host:0", "tcp::77", "tcp:host:99999", "file:"}) {
    try {
      rendezvous_publish(spec, 2, secret(), quick("t"));
      ADD_FAILURE() << spec;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
    }
  }
  EXPECT_EQ(make_rendezvous_token().size(), 32u);
  EXPECT_NE(make_rendezvous_token(), make_rendezvous_token());
}

}  // namespace
}  // namespace reshard
