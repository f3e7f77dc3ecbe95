// The rendezvous' internals shared by its tcp and file halves (rendezvous_tcp.cpp, rendezvous_file.cpp): the parsed
// spec, the wire format's pieces, a file descriptor closed on scope exit. rendezvous.cpp parses the spec and the token
// and hands each kind of spec to its half.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "reshard/rendezvous.hpp"

namespace reshard::rendezvous_internal {

using Clock = std::chrono::steady_clock;

// Wire format (integers little-endian, 32 bits):
//   hello (rank r -> rank 0): magic[8] version world_size rank token_bytes token
//   reply (rank 0 -> rank r): magic[8] version status world_size payload_bytes payload   (sent only after a valid
//                                                                                          hello with the right token)
//   file:                     magic[8] version world_size token_bytes token payload_bytes payload
inline constexpr char kMagic[8] = {'R', 'S', 'H', 'D', 'R', 'N', 'D', 'Z'};
inline constexpr std::uint32_t kVersion = 1;

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

inline void put32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
}
inline std::uint32_t get32(std::string_view in, size_t at) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(static_cast<unsigned char>(in[at + i])) << (8 * i);
  return v;
}
inline bool has_magic(std::string_view in) { return in.size() >= 8 && std::memcmp(in.data(), kMagic, 8) == 0; }

// Compares tokens without an early exit on the first differing byte.
inline bool same_token(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// tcp (rendezvous_tcp.cpp): rank 0 serves every other rank's hello; the others connect until rank 0 answers.
RendezvousStats publish_tcp(const Spec& s, int world, std::span<const std::byte> payload, const std::string& token,
                            const RendezvousOptions& options);
std::vector<std::byte> fetch_tcp(const Spec& s, int world, int rank, size_t bytes, const std::string& token,
                                 const RendezvousOptions& options);

// file (rendezvous_file.cpp): rank 0 writes the file; the others wait for one that carries the job's token.
void publish_file(const Spec& s, int world, std::span<const std::byte> payload, const std::string& token);
std::vector<std::byte> fetch_file(const Spec& s, int world, int rank, size_t bytes, const std::string& token,
                                  const RendezvousOptions& options);

}  // namespace reshard::rendezvous_internal
