// Creating NCCL communicators: all local GPUs in one process, or one rank per process with the NCCL id passed
// through a file or a small TCP rendezvous.
#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "reshard/cuda_check.hpp"
#include "reshard/nccl_communicator.hpp"

namespace reshard {
namespace {

using Clock = std::chrono::steady_clock;

void nccl_ok(ncclResult_t r, const char* call) {
  if (r != ncclSuccess && r != ncclInProgress) detail::throw_nccl(r, nullptr, call, __FILE__, __LINE__);
}

ncclConfig_t make_config(const NcclOptions& options) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = options.nonblocking ? 0 : 1;
  return config;
}

// A socket closed on scope exit.
struct Socket {
  int fd = -1;
  ~Socket() {
    if (fd >= 0) ::close(fd);
  }
};

std::pair<std::string, int> parse_host_port(const std::string& spec) {
  size_t colon = spec.rfind(':');
  RESHARD_REQUIRE(colon != std::string::npos && colon > 0 && colon + 1 < spec.size(), "rendezvous 'tcp:", spec,
                  "' must be tcp:HOST:PORT");
  int port = 0;
  try {
    port = std::stoi(spec.substr(colon + 1));
  } catch (...) {
    port = -1;
  }
  RESHARD_REQUIRE(port > 0 && port < 65536, "rendezvous port '", spec.substr(colon + 1), "' is not a port number");
  return {spec.substr(0, colon), port};
}

void send_all(int fd, const void* data, size_t n) {
  auto* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) fail(ErrorKind::kBackend, cat("rendezvous: send failed: ", std::strerror(errno)));
    p += k;
    n -= static_cast<size_t>(k);
  }
}

void recv_all(int fd, void* data, size_t n) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t k = ::recv(fd, p, n, 0);
    if (k <= 0)
      fail(ErrorKind::kBackend, cat("rendezvous: receive failed: ", k == 0 ? "peer closed" : std::strerror(errno)));
    p += k;
    n -= static_cast<size_t>(k);
  }
}

void tcp_publish(const std::string& spec, const ncclUniqueId& id, int peers, std::chrono::milliseconds timeout) {
  auto [host, port] = parse_host_port(spec);
  Socket server;
  server.fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (server.fd < 0) fail(ErrorKind::kBackend, cat("rendezvous: socket: ", std::strerror(errno)));
  int one = 1;
  ::setsockopt(server.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  if (::bind(server.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(server.fd, peers + 1) != 0)
    fail(ErrorKind::kBackend, cat("rendezvous: cannot listen on port ", port, ": ", std::strerror(errno)));
  timeval tv{static_cast<time_t>(timeout.count() / 1000), static_cast<suseconds_t>((timeout.count() % 1000) * 1000)};
  ::setsockopt(server.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  for (int i = 0; i < peers; ++i) {
    Socket client;
    client.fd = ::accept(server.fd, nullptr, nullptr);
    if (client.fd < 0)
      fail(ErrorKind::kTimeout,
           cat("rendezvous: only ", i, " of ", peers, " ranks connected within ", timeout.count(), " ms"));
    send_all(client.fd, &id, sizeof(id));
  }
}

ncclUniqueId tcp_fetch(const std::string& spec, std::chrono::milliseconds timeout) {
  auto [host, port] = parse_host_port(spec);
  const auto deadline = Clock::now() + timeout;
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res)
    fail(ErrorKind::kInvalidArgument, cat("rendezvous: cannot resolve host '", host, "'"));
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(res, ::freeaddrinfo);
  while (true) {
    Socket s;
    s.fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (s.fd >= 0 && ::connect(s.fd, res->ai_addr, res->ai_addrlen) == 0) {
      ncclUniqueId id;
      recv_all(s.fd, &id, sizeof(id));
      return id;
    }
    if (Clock::now() > deadline)
      fail(ErrorKind::kTimeout, cat("rendezvous: rank 0 at ", spec, " did not answer within ", timeout.count(), " ms"));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void file_publish(const std::string& path, const ncclUniqueId& id) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    RESHARD_REQUIRE(out.good(), "rendezvous: cannot write '", tmp, "'");
    out.write(reinterpret_cast<const char*>(&id), sizeof(id));
  }
  std::filesystem::rename(tmp, path);  // atomic: readers never see a partial id
}

ncclUniqueId file_fetch(const std::string& path, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    std::ifstream in(path, std::ios::binary);
    ncclUniqueId id;
    if (in.read(reinterpret_cast<char*>(&id), sizeof(id))) return id;
    if (Clock::now() > deadline)
      fail(ErrorKind::kTimeout, cat("rendezvous: '", path, "' did not appear within ", timeout.count(), " ms"));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

std::vector<std::unique_ptr<NcclCommunicator>> make_local_communicators(int n, NcclOptions options) {
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess) gpus = 0;
  RESHARD_REQUIRE(n >= 1 && n <= gpus, "need ", n, " GPUs in this process but ", gpus, " are visible");
  ncclUniqueId id;
  nccl_ok(ncclGetUniqueId(&id), "ncclGetUniqueId");
  std::vector<ncclComm_t> comms(n, nullptr);
  ncclConfig_t config = make_config(options);
  nccl_ok(ncclGroupStart(), "ncclGroupStart");
  for (int i = 0; i < n; ++i) {
    RESHARD_CUDA_CHECK(cudaSetDevice(i));
    nccl_ok(ncclCommInitRankConfig(&comms[i], n, id, i, &config), "ncclCommInitRankConfig");
  }
  nccl_ok(ncclGroupEnd(), "ncclGroupEnd");
  std::vector<std::unique_ptr<NcclCommunicator>> out;
  for (int i = 0; i < n; ++i) {
    RESHARD_CUDA_CHECK(cudaSetDevice(i));
    // Wait for initialisation before querying rank and size.
    const auto deadline = Clock::now() + options.timeout;
    ncclResult_t state = ncclInProgress;
    while (state == ncclInProgress) {
      ncclCommGetAsyncError(comms[i], &state);
      if (state == ncclInProgress && Clock::now() > deadline)
        fail(ErrorKind::kTimeout,
             cat("NCCL initialisation of rank ", i, " did not finish within ", options.timeout.count(), " ms"));
    }
    if (state != ncclSuccess) detail::throw_nccl(state, comms[i], "ncclCommInitRankConfig", __FILE__, __LINE__);
    out.push_back(std::make_unique<NcclCommunicator>(comms[i], true, options));
  }
  return out;
}

std::unique_ptr<NcclCommunicator> make_process_communicator(int rank, int size, int device,
                                                            const std::string& rendezvous, NcclOptions options) {
  RESHARD_REQUIRE(size >= 1 && rank >= 0 && rank < size, "rank ", rank, " is outside a world of ", size);
  RESHARD_CUDA_CHECK(cudaSetDevice(device));
  ncclUniqueId id;
  bool tcp = rendezvous.rfind("tcp:", 0) == 0, file = rendezvous.rfind("file:", 0) == 0;
  RESHARD_REQUIRE(tcp || file, "rendezvous '", rendezvous, "' must be file:PATH or tcp:HOST:PORT");
  std::string spec = rendezvous.substr(tcp ? 4 : 5);
  if (rank == 0) {
    nccl_ok(ncclGetUniqueId(&id), "ncclGetUniqueId");
    if (file)
      file_publish(spec, id);
    else
      std::thread([&] { tcp_publish(spec, id, size - 1, options.timeout); }).join();
  } else {
    id = file ? file_fetch(spec, options.timeout) : tcp_fetch(spec, options.timeout);
  }
  // A blocking init waits for every rank; run it on a helper thread so that a rank that never starts becomes a
  // timeout here instead of a hang (the helper is left behind; the caller is expected to exit).
  struct Init {
    std::mutex mutex;
    std::condition_variable cv;
    bool done = false;
    ncclResult_t result = ncclSuccess;
    ncclComm_t comm = nullptr;
  };
  auto init = std::make_shared<Init>();
  ncclConfig_t config = make_config(options);
  std::thread([init, size, id, rank, device, config]() mutable {
    cudaSetDevice(device);
    ncclComm_t c = nullptr;
    ncclResult_t r = ncclCommInitRankConfig(&c, size, id, rank, &config);
    while (r == ncclSuccess || r == ncclInProgress) {  // non-blocking: wait for the end of the initialisation
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(c, &state);
      if (state != ncclInProgress) {
        r = state;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::lock_guard<std::mutex> lock(init->mutex);
    init->result = r;
    init->comm = c;
    init->done = true;
    init->cv.notify_all();
  }).detach();
  ncclComm_t comm = nullptr;
  {
    std::unique_lock<std::mutex> lock(init->mutex);
    if (!init->cv.wait_for(lock, options.timeout, [&] { return init->done; }))
      fail(ErrorKind::kTimeout, cat("NCCL initialisation of rank ", rank, " of ", size, " did not finish within ",
                                    options.timeout.count(), " ms (did every rank start?)"));
    if (init->result != ncclSuccess)
      detail::throw_nccl(init->result, init->comm, "ncclCommInitRankConfig", __FILE__, __LINE__);
    comm = init->comm;
  }
  RESHARD_CUDA_CHECK(cudaSetDevice(device));
  return std::make_unique<NcclCommunicator>(comm, true, options);
}

}  // namespace reshard
