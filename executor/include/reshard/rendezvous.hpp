// Rendezvous: how the processes of a multi-process job receive a small payload that rank 0 publishes (the NCCL
// unique id). It moves bytes only (no NCCL types), so it is built and tested without a GPU.
//
// Specs:
//   tcp:HOST:PORT  rank 0 listens on HOST:PORT, the address the user named (tcp:0.0.0.0:PORT, or tcp:[::]:PORT, opts
//                  in to every interface); the others connect to it. Every connection starts with a handshake (magic,
//                  protocol version, world size, rank, job token) before anything is sent back: connections with a
//                  bad or missing handshake, a wrong token, or a rank outside the world or already served are dropped
//                  and counted, and never take a rank's slot or see the payload.
//   file:PATH      rank 0 writes PATH (mode 0600, atomically: written aside, then renamed), carrying the job token; the
//                  others wait for a file at PATH that carries their token, so a file left by an earlier job is never
//                  used. File rendezvous needs a token.
// The job token is RendezvousOptions::token or, when that is empty, the environment variable RESHARD_RENDEZVOUS_TOKEN
// (the same on every rank; a launcher generates one with make_rendezvous_token()). docs/security.md has the threat
// model.
#pragma once

#include <chrono>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace reshard {

inline constexpr const char* kRendezvousTokenEnv = "RESHARD_RENDEZVOUS_TOKEN";
inline constexpr size_t kMaxRendezvousToken = 256;     // bytes
inline constexpr size_t kMaxRendezvousPayload = 4096;  // bytes

struct RendezvousOptions {
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};  // the whole rendezvous, on every rank
  // How long rank 0 waits for one connection's handshake before dropping it (a silent connection never blocks others).
  std::chrono::milliseconds handshake_timeout{std::chrono::seconds(5)};
  std::string token;  // empty: RESHARD_RENDEZVOUS_TOKEN
};

struct RendezvousStats {
  int joined = 0;   // ranks that received the payload
  int dropped = 0;  // connections closed without it (bad handshake, wrong token, bad or repeated rank, timeout)
};

// Rank 0: publishes `payload` (at most kMaxRendezvousPayload bytes) to the other world_size - 1 ranks. tcp: returns
// once every rank has it; kTimeout naming how many joined (and how many connections were dropped) otherwise. file:
// returns once the file is in place.
RendezvousStats rendezvous_publish(const std::string& spec, int world_size, std::span<const std::byte> payload,
                                   const RendezvousOptions& options = {});

// Rank `rank` (1 .. world_size - 1): waits for rank 0's payload of exactly `payload_bytes` bytes. kTimeout when it does
// not arrive in time (saying why: nobody listening, connections closed without an answer as for a wrong token, a file
// that carries another job's token); kInvalidArgument when rank 0 runs another world size or already served this rank.
std::vector<std::byte> rendezvous_fetch(const std::string& spec, int world_size, int rank, size_t payload_bytes,
                                        const RendezvousOptions& options = {});

// 32 hex digits from the system's random source: a fresh job token for a launcher to put in every rank's environment.
std::string make_rendezvous_token();

// kInvalidArgument naming the problem when `spec` is not file:PATH or tcp:HOST:PORT (an unknown scheme, an empty path
// or host, a port outside 1..65535): what publish and fetch check, for callers that check a flag before anything else.
void check_rendezvous_spec(const std::string& spec);

}  // namespace reshard
