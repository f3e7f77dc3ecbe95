// Rendezvous through a file: rank 0 writes PATH (mode 0600, atomically) with the job token; the other ranks wait for
// a file at PATH that carries their token.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous_wire.hpp"
#include "reshard/error.hpp"
#include "reshard/text.hpp"

namespace reshard::rendezvous_internal {
namespace {

using std::chrono::milliseconds;

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

std::string file_needs_token(const Spec& s) {
  return cat("rendezvous '", s.text, "' needs a job token: set ", kRendezvousTokenEnv,
             " to the same fresh value on every rank (a launcher makes one with make_rendezvous_token(), a shell with "
             "`openssl rand -hex 16`), so that a file left by an earlier job is never read");
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

}  // namespace

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

}  // namespace reshard::rendezvous_internal
