#include "reshard/rendezvous.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "reshard/error.hpp"
#include "reshard/text.hpp"

namespace reshard {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Wire format (integers little-endian, 32 bits):
//   hello (rank r -> rank 0): magic[8] version world_size rank token_bytes token
//   reply (rank 0 -> rank r): magic[8] version status world_size payload_bytes payload   (sent only after a valid
//                                                                                          hello with the right token)
//   file:                     magic[8] version world_size token_bytes token payload_bytes payload
constexpr char kMagic[8] = {'R', 'S', 'H', 'D', 'R', 'N', 'D', 'Z'};
constexpr std::uint32_t kVersion = 1;
constexpr size_t kHelloHeader = 8 + 4 * 4;
constexpr size_t kReplyHeader = 8 + 4 * 4;
constexpr size_t kMaxPending = 64;  // connections waiting for their handshake; past it the oldest is dropped
enum Status : std::uint32_t { kOk = 0, kWorldMismatch = 1, kRankTaken = 2, kRankOutside = 3 };

// A file descriptor closed on scope exit.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ~Fd() { reset(); }
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

struct Spec {
  bool tcp = false;
  std::string host, port, path, text;
};

Spec parse_spec(const std::string& text) {
  Spec s;
  s.text = printable(text);
  if (text.rfind("file:", 0) == 0) {
    s.path = text.substr(5);
    RESHARD_REQUIRE(!s.path.empty(), "rendezvous '", s.text, "': empty path; expected file:PATH");
    return s;
  }
  RESHARD_REQUIRE(text.rfind("tcp:", 0) == 0, "rendezvous '", s.text, "' must be file:PATH or tcp:HOST:PORT");
  s.tcp = true;
  const std::string rest = text.substr(4);
  const size_t colon = rest.rfind(':');
  RESHARD_REQUIRE(colon != std::string::npos && colon > 0, "rendezvous '", s.text, "' must be tcp:HOST:PORT");
  s.host = rest.substr(0, colon);
  if (s.host.size() >= 2 && s.host.front() == '[' && s.host.back() == ']') s.host = s.host.substr(1, s.host.size() - 2);
  s.port = rest.substr(colon + 1);
  std::optional<long long> port = parse_integer(s.port);
  RESHARD_REQUIRE(!s.host.empty(), "rendezvous '", s.text, "': empty host; expected tcp:HOST:PORT");
  RESHARD_REQUIRE(port && *port > 0 && *port < 65536, "rendezvous '", s.text, "': port '", printable(s.port),
                  "' is not a port number (1..65535)");
  return s;
}

std::string job_token(const RendezvousOptions& options) {
  std::string token = options.token;
  if (token.empty()) {
    const char* env = std::getenv(kRendezvousTokenEnv);
    token = env ? env : "";
  }
  RESHARD_REQUIRE(token.size() <= kMaxRendezvousToken, "the rendezvous token has ", token.size(), " bytes; at most ",
                  kMaxRendezvousToken);
  return token;
}

void put32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
}
std::uint32_t get32(std::string_view in, size_t at) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(static_cast<unsigned char>(in[at + i])) << (8 * i);
  return v;
}
bool has_magic(std::string_view in) { return in.size() >= 8 && std::memcmp(in.data(), kMagic, 8) == 0; }

// Compares tokens without an early exit on the first differing byte.
bool same_token(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

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

// Writes everything to a file; false on error.
bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t k = ::write(fd, data.data(), data.size());
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    data.remove_prefix(static_cast<size_t>(k));
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

// ---- file --------------------------------------------------------------------------------------------------------

std::string file_needs_token(const Spec& s) {
  return cat("rendezvous '", s.text, "' needs a job token: set ", kRendezvousTokenEnv,
             " to the same fresh value on every rank (a launcher makes one with make_rendezvous_token(), a shell with "
             "`openssl rand -hex 16`), so that a file left by an earlier job is never read");
}

void publish_file(const Spec& s, int world, std::span<const std::byte> payload, const std::string& token) {
  RESHARD_REQUIRE(!token.empty(), file_needs_token(s));
  std::string content(kMagic, 8);
  put32(content, kVersion);
  put32(content, static_cast<std::uint32_t>(world));
  put32(content, static_cast<std::uint32_t>(token.size()));
  content += token;
  put32(content, static_cast<std::uint32_t>(payload.size()));
  content.append(reinterpret_cast<const char*>(payload.data()), payload.size());
  // Written aside under a fresh name (O_EXCL: never through a planted file or link), then renamed over PATH: readers
  // see the whole file or none of it, and a stale file is replaced.
  const std::string tmp = s.path + ".tmp." + std::to_string(::getpid()) + "." + make_rendezvous_token().substr(0, 8);
  {
    Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (fd.get() < 0)
      fail(ErrorKind::kBackend, cat("rendezvous: cannot create '", printable(tmp), "': ", std::strerror(errno)));
    ::fchmod(fd.get(), 0600);
    if (!write_all(fd.get(), content)) {
      ::unlink(tmp.c_str());
      fail(ErrorKind::kBackend, cat("rendezvous: cannot write '", printable(tmp), "': ", std::strerror(errno)));
    }
  }
  if (::rename(tmp.c_str(), s.path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail(ErrorKind::kBackend, cat("rendezvous: cannot move the id to '", printable(s.path), "': ", std::strerror(err)));
  }
}

// The payload of the file at PATH when it is this job's; otherwise empty, with `why` saying what is there.
std::optional<std::vector<std::byte>> read_job_file(const Spec& s, int world, size_t bytes, const std::string& token,
                                                    std::string& why) {
  Fd fd(::open(s.path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW));
  if (fd.get() < 0) {
    why = errno == ENOENT ? "no file yet" : cat("cannot open it: ", std::strerror(errno));
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 077) != 0) {
    why = "a file that is not this user's private (0600) regular file";
    return std::nullopt;
  }
  const size_t max = 8 + 4 * 4 + kMaxRendezvousToken + kMaxRendezvousPayload;
  std::string text(max + 1, '\0');
  ssize_t k = ::read(fd.get(), text.data(), text.size());
  text.resize(k > 0 ? static_cast<size_t>(k) : 0);
  if (text.size() < 8 + 4 * 3 || !has_magic(text) || get32(text, 8) != kVersion) {
    why = "a file that is not a reshard rendezvous file of this version";
    return std::nullopt;
  }
  const size_t token_bytes = get32(text, 16);
  if (token_bytes > kMaxRendezvousToken || text.size() < 20 + token_bytes + 4 ||
      !same_token(std::string_view(text).substr(20, token_bytes), token)) {
    why = "a file that carries another job's token (left by an earlier job?)";
    return std::nullopt;
  }
  if (get32(text, 12) != static_cast<std::uint32_t>(world)) {
    why = cat("a file of this job for a world of ", get32(text, 12), " ranks, not ", world);
    return std::nullopt;
  }
  const size_t n = get32(text, 20 + token_bytes);
  if (n != bytes || text.size() != 24 + token_bytes + n) {
    why = cat("a file of this job whose payload is not ", bytes, " bytes");
    return std::nullopt;
  }
  std::vector<std::byte> out(n);
  std::memcpy(out.data(), text.data() + 24 + token_bytes, n);
  return out;
}

std::vector<std::byte> fetch_file(const Spec& s, int world, int rank, size_t bytes, const std::string& token,
                                  const RendezvousOptions& options) {
  RESHARD_REQUIRE(!token.empty(), file_needs_token(s));
  const auto deadline = Clock::now() + options.timeout;
  std::string why;
  while (true) {
    if (auto payload = read_job_file(s, world, bytes, token, why)) return *payload;
    if (Clock::now() >= deadline)
      fail(ErrorKind::kTimeout, cat("rendezvous: rank ", rank, " found no file of this job at '", printable(s.path),
                                    "' within ", options.timeout.count(), " ms (", why, ")"));
    std::this_thread::sleep_for(milliseconds(20));
  }
}

}  // namespace

RendezvousStats rendezvous_publish(const std::string& spec, int world_size, std::span<const std::byte> payload,
                                   const RendezvousOptions& options) {
  const Spec s = parse_spec(spec);
  RESHARD_REQUIRE(world_size >= 1, "rendezvous: world size must be >= 1, got ", world_size);
  RESHARD_REQUIRE(payload.size() <= kMaxRendezvousPayload, "rendezvous: payload of ", payload.size(),
                  " bytes; at most ", kMaxRendezvousPayload);
  const std::string token = job_token(options);
  if (!s.tcp) {
    publish_file(s, world_size, payload, token);
    return RendezvousStats{world_size - 1, 0};
  }
  if (world_size == 1) return {};
  return Publisher(world_size, payload, token, options).run(s);
}

std::vector<std::byte> rendezvous_fetch(const std::string& spec, int world_size, int rank, size_t payload_bytes,
                                        const RendezvousOptions& options) {
  const Spec s = parse_spec(spec);
  RESHARD_REQUIRE(rank >= 1 && rank < world_size, "rendezvous: rank ", rank, " is not a receiving rank of a world of ",
                  world_size);
  RESHARD_REQUIRE(payload_bytes <= kMaxRendezvousPayload, "rendezvous: payload of ", payload_bytes, " bytes; at most ",
                  kMaxRendezvousPayload);
  const std::string token = job_token(options);
  return s.tcp ? fetch_tcp(s, world_size, rank, payload_bytes, token, options)
               : fetch_file(s, world_size, rank, payload_bytes, token, options);
}

std::string make_rendezvous_token() {
  static constexpr char kHex[] = "0123456789abcdef";
  std::random_device random;  // the system's random source (/dev/urandom on Linux)
  std::string token;
  for (int i = 0; i < 16; ++i) {
    const unsigned byte = random() & 0xFF;
    token += kHex[byte >> 4];
    token += kHex[byte & 15];
  }
  return token;
}

void check_rendezvous_spec(const std::string& spec) { parse_spec(spec); }

}  // namespace reshard
