// Rendezvous over tcp: rank 0 listens and answers each rank's hello that carries the job's token with the payload;
// the other ranks connect until it does.
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "rendezvous_wire.hpp"
#include "reshard/error.hpp"
#include "reshard/text.hpp"

namespace reshard::rendezvous_internal {
namespace {

using std::chrono::milliseconds;

constexpr size_t kHelloHeader = 8 + 4 * 4;
constexpr size_t kReplyHeader = 8 + 4 * 4;
constexpr size_t kMaxPending = 64;  // connections waiting for their handshake; past it the oldest is dropped
enum Status : std::uint32_t { kOk = 0, kWorldMismatch = 1, kRankTaken = 2, kRankOutside = 3 };

int ms_until(Clock::time_point t) {
  const auto left = std::chrono::duration_cast<milliseconds>(t - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 1000));
}

// Sends everything before `deadline` (the socket may be non-blocking); false on error or time-out.
bool send_all(int fd, std::string_view data, Clock::time_point deadline) {
  while (!data.empty()) {
    ssize_t k = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      data.remove_prefix(static_cast<size_t>(k));
      continue;
    }
    if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
    if (Clock::now() >= deadline) return false;
    pollfd p{fd, POLLOUT, 0};
    ::poll(&p, 1, std::max(1, ms_until(deadline)));
  }
  return true;
}

// Receives exactly n bytes before `deadline`; false on error, end of stream or time-out.
bool recv_exact(int fd, std::string& out, size_t n, Clock::time_point deadline) {
  out.resize(n);
  size_t have = 0;
  while (have < n) {
    ssize_t k = ::recv(fd, out.data() + have, n - have, MSG_DONTWAIT);
    if (k > 0) {
      have += static_cast<size_t>(k);
      continue;
    }
    if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return false;
    if (Clock::now() >= deadline) return false;
    pollfd p{fd, POLLIN, 0};
    ::poll(&p, 1, std::max(1, ms_until(deadline)));
  }
  return true;
}

struct AddrInfo {
  addrinfo* list = nullptr;
  ~AddrInfo() {
    if (list) ::freeaddrinfo(list);
  }
};

// ---- tcp, rank 0 -------------------------------------------------------------------------------------------------

// The numeric address of `a` ("127.0.0.1", "::1"), for messages.
std::string numeric_host(const addrinfo* a) {
  char host[NI_MAXHOST] = {};
  if (::getnameinfo(a->ai_addr, a->ai_addrlen, host, sizeof host, nullptr, 0, NI_NUMERICHOST) != 0) return "?";
  return host;
}

// Listens on every address the rendezvous host resolves to (localhost: 127.0.0.1 and ::1 alike), since the other ranks
// try each of them in turn: an address rank 0 does not hold could be anyone's, and a rank would send its hello, the job
// token with it, there. Fails naming the first address that cannot be bound (another process holds it).
std::vector<Fd> listen_on(const Spec& s) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  AddrInfo res;
  if (int rc = ::getaddrinfo(s.host.c_str(), s.port.c_str(), &hints, &res.list); rc != 0 || !res.list)
    fail(ErrorKind::kInvalidArgument,
         cat("rendezvous '", s.text, "': cannot resolve host '", printable(s.host), "': ", ::gai_strerror(rc)));
  std::vector<Fd> out;
  std::vector<std::string> bound;
  for (addrinfo* a = res.list; a; a = a->ai_next) {
    const std::string host = numeric_host(a);
    if (std::find(bound.begin(), bound.end(), host) != bound.end()) continue;
    Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    int one = 1;
    if (fd.get() >= 0) {
      ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      if (a->ai_family == AF_INET6) ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    }
    if (fd.get() < 0 || ::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd.get(), 128) != 0)
      fail(ErrorKind::kBackend,
           cat("rendezvous: rank 0 cannot listen on ", host, " port ", s.port, ", one of the addresses '",
               printable(s.host), "' resolves to (", std::strerror(errno),
               "); it must run on the host the rendezvous names, with the port free on every address "
               "(tcp:0.0.0.0:PORT listens on every IPv4 interface)"));
    bound.push_back(host);
    out.push_back(std::move(fd));
  }
  return out;
}

struct Pending {
  Fd fd;
  Clock::time_point deadline;
  std::string buf;  // the hello so far
};

class Publisher {
 public:
  Publisher(int world, std::span<const std::byte> payload, std::string token, const RendezvousOptions& options)
      : world_(world), token_(std::move(token)), options_(options), served_(world, false) {
    served_[0] = true;
    payload_.assign(reinterpret_cast<const char*>(payload.data()), payload.size());
  }

  RendezvousStats run(const Spec& s) {
    const std::vector<Fd> servers = listen_on(s);
    const auto deadline = Clock::now() + options_.timeout;
    while (stats_.joined < world_ - 1) {
      const auto now = Clock::now();
      if (now >= deadline)
        fail(ErrorKind::kTimeout, cat("rendezvous: only ", stats_.joined, " of ", world_ - 1,
                                      " ranks joined rank 0 at ", s.text, " within ", options_.timeout.count(), " ms (",
                                      stats_.dropped, " connections dropped: wrong token, handshake, or rank)"));
      auto next = deadline;
      for (size_t i = pending_.size(); i-- > 0;) {
        if (now >= pending_[i].deadline) {
          drop(i);
        } else {
          next = std::min(next, pending_[i].deadline);
        }
      }
      std::vector<pollfd> fds;
      for (const Fd& server : servers) fds.push_back({server.get(), POLLIN, 0});
      const size_t first = fds.size();
      for (const Pending& p : pending_) fds.push_back({p.fd.get(), POLLIN, 0});
      if (::poll(fds.data(), fds.size(), std::max(1, ms_until(next))) < 0 && errno != EINTR)
        fail(ErrorKind::kBackend, cat("rendezvous: poll failed: ", std::strerror(errno)));
      for (size_t i = pending_.size(); i-- > 0;)
        if (fds[first + i].revents) serve(i);
      for (size_t k = 0; k < first; ++k)
        if (fds[k].revents & POLLIN) accept_all(servers[k].get());
    }
    return stats_;
  }

 private:
  void drop(size_t i) {
    pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
    ++stats_.dropped;
  }

  void accept_all(int server) {
    while (true) {
      Fd c(::accept4(server, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (c.get() < 0) return;
      if (pending_.size() >= kMaxPending) drop(0);
      pending_.push_back(Pending{std::move(c), Clock::now() + options_.handshake_timeout, {}});
    }
  }

  // Reads what has arrived of a hello; answers and closes it when complete, drops it when it is not one.
  void serve(size_t i) {
    Pending& p = pending_[i];
    const size_t need = p.buf.size() < kHelloHeader ? kHelloHeader : kHelloHeader + get32(p.buf, 20);
    char chunk[512];
    ssize_t k = ::recv(p.fd.get(), chunk, std::min(sizeof(chunk), need - p.buf.size()), MSG_DONTWAIT);
    if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return drop(i);
    if (k < 0) return;
    p.buf.append(chunk, static_cast<size_t>(k));
    if (p.buf.size() == kHelloHeader) {
      if (!has_magic(p.buf) || get32(p.buf, 8) != kVersion || get32(p.buf, 20) > kMaxRendezvousToken) return drop(i);
      if (get32(p.buf, 20) > 0) return;  // the token follows
    }
    if (p.buf.size() < kHelloHeader || p.buf.size() < kHelloHeader + get32(p.buf, 20)) return;
    // A complete hello: nothing is sent back to a connection that does not hold the job's token.
    if (!same_token(std::string_view(p.buf).substr(kHelloHeader), token_)) return drop(i);
    const std::uint32_t world = get32(p.buf, 12), rank = get32(p.buf, 16);
    const Status status = world != static_cast<std::uint32_t>(world_)               ? kWorldMismatch
                          : rank == 0 || rank >= static_cast<std::uint32_t>(world_) ? kRankOutside
                          : served_[rank]                                           ? kRankTaken
                                                                                    : kOk;
    std::string reply(kMagic, 8);
    put32(reply, kVersion);
    put32(reply, status);
    put32(reply, static_cast<std::uint32_t>(world_));
    put32(reply, status == kOk ? static_cast<std::uint32_t>(payload_.size()) : 0);
    if (status == kOk) reply += payload_;
    const bool sent = send_all(p.fd.get(), reply, Clock::now() + options_.handshake_timeout);
    if (status != kOk || !sent) return drop(i);
    served_[rank] = true;
    ++stats_.joined;
    pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
  }

  int world_;
  std::string token_, payload_;
  RendezvousOptions options_;
  std::vector<bool> served_;
  std::vector<Pending> pending_;
  RendezvousStats stats_;
};

// ---- tcp, other ranks --------------------------------------------------------------------------------------------

// Connects before `deadline`; an invalid Fd when nobody accepts (yet).
Fd connect_to(const addrinfo* a, Clock::time_point deadline) {
  Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
  if (fd.get() < 0) return Fd();
  if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) == 0) return fd;
  if (errno != EINPROGRESS) return Fd();
  pollfd p{fd.get(), POLLOUT, 0};
  while (::poll(&p, 1, std::max(1, ms_until(deadline))) == 0)
    if (Clock::now() >= deadline) return Fd();
  int err = 0;
  socklen_t len = sizeof(err);
  if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) return Fd();
  return fd;
}

}  // namespace

RendezvousStats publish_tcp(const Spec& s, int world, std::span<const std::byte> payload, const std::string& token,
                            const RendezvousOptions& options) {
  return Publisher(world, payload, token, options).run(s);
}

std::vector<std::byte> fetch_tcp(const Spec& s, int world, int rank, size_t bytes, const std::string& token,
                                 const RendezvousOptions& options) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  AddrInfo res;
  if (int rc = ::getaddrinfo(s.host.c_str(), s.port.c_str(), &hints, &res.list); rc != 0 || !res.list)
    fail(ErrorKind::kInvalidArgument,
         cat("rendezvous '", s.text, "': cannot resolve host '", printable(s.host), "': ", ::gai_strerror(rc)));
  std::string hello(kMagic, 8);
  put32(hello, kVersion);
  put32(hello, static_cast<std::uint32_t>(world));
  put32(hello, static_cast<std::uint32_t>(rank));
  put32(hello, static_cast<std::uint32_t>(token.size()));
  hello += token;
  const auto deadline = Clock::now() + options.timeout;
  int unanswered = 0;
  while (Clock::now() < deadline) {
    for (const addrinfo* a = res.list; a; a = a->ai_next) {
      const auto attempt = std::min(deadline, Clock::now() + options.handshake_timeout + milliseconds(1000));
      Fd fd = connect_to(a, attempt);
      if (fd.get() < 0) continue;
      std::string head, body;
      if (!send_all(fd.get(), hello, attempt) || !recv_exact(fd.get(), head, kReplyHeader, attempt) ||
          !has_magic(head) || get32(head, 8) != kVersion) {
        ++unanswered;  // rank 0 drops a hello it does not accept without a word
        continue;
      }
      const std::uint32_t status = get32(head, 12), theirs = get32(head, 16), n = get32(head, 20);
      RESHARD_REQUIRE(status != kWorldMismatch, "rendezvous: rank 0 at ", s.text, " runs a world of ", theirs,
                      " ranks; this rank (", rank, ") expects ", world);
      RESHARD_REQUIRE(status != kRankTaken, "rendezvous: rank 0 at ", s.text, " already served rank ", rank,
                      " (two processes with the same RANK?)");
      RESHARD_REQUIRE(status == kOk, "rendezvous: rank 0 at ", s.text, " refused rank ", rank, " (status ", status,
                      ")");
      RESHARD_REQUIRE(n == bytes, "rendezvous: rank 0 at ", s.text, " sent ", n, " bytes; expected ", bytes);
      if (!recv_exact(fd.get(), body, n, attempt)) {
        ++unanswered;
        continue;
      }
      std::vector<std::byte> out(n);
      std::memcpy(out.data(), body.data(), n);
      return out;
    }
    std::this_thread::sleep_for(milliseconds(unanswered > 0 ? 200 : 50));
  }
  fail(ErrorKind::kTimeout,
       cat("rendezvous: rank ", rank, " got no answer from rank 0 at ", s.text, " within ", options.timeout.count(),
           " ms",
           unanswered > 0 ? cat("; ", unanswered, " connections were closed without an answer (is ",
                                kRendezvousTokenEnv, " the same on every rank?)")
                          : std::string("; nobody accepted the connection (did rank 0 start?)")));
}

}  // namespace reshard::rendezvous_internal
