#include "reshard/rendezvous.hpp"

#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "rendezvous_wire.hpp"
#include "reshard/error.hpp"
#include "reshard/text.hpp"

namespace reshard {
namespace {

using rendezvous_internal::Spec;

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

}  // namespace

RendezvousStats rendezvous_publish(const std::string& spec, int world_size, std::span<const std::byte> payload,
                                   const RendezvousOptions& options) {
  const Spec s = parse_spec(spec);
  RESHARD_REQUIRE(world_size >= 1, "rendezvous: world size must be >= 1, got ", world_size);
  RESHARD_REQUIRE(payload.size() <= kMaxRendezvousPayload, "rendezvous: payload of ", payload.size(),
                  " bytes; at most ", kMaxRendezvousPayload);
  const std::string token = job_token(options);
  if (!s.tcp) {
    rendezvous_internal::publish_file(s, world_size, payload, token);
    return RendezvousStats{world_size - 1, 0};
  }
  if (world_size == 1) return {};
  return rendezvous_internal::publish_tcp(s, world_size, payload, token, options);
}

std::vector<std::byte> rendezvous_fetch(const std::string& spec, int world_size, int rank, size_t payload_bytes,
                                        const RendezvousOptions& options) {
  const Spec s = parse_spec(spec);
  RESHARD_REQUIRE(rank >= 1 && rank < world_size, "rendezvous: rank ", rank, " is not a receiving rank of a world of ",
                  world_size);
  RESHARD_REQUIRE(payload_bytes <= kMaxRendezvousPayload, "rendezvous: payload of ", payload_bytes, " bytes; at most ",
                  kMaxRendezvousPayload);
  const std::string token = job_token(options);
  return s.tcp ? rendezvous_internal::fetch_tcp(s, world_size, rank, payload_bytes, token, options)
               : rendezvous_internal::fetch_file(s, world_size, rank, payload_bytes, token, options);
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
