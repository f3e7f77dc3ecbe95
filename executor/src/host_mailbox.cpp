// The shared-memory host all-gather (host_mailbox.hpp says what and why).
#include "reshard/detail/host_mailbox.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <exception>
#include <random>
#include <thread>
#include <vector>

#include "reshard/detail/poll_pacing.hpp"
#include "reshard/error.hpp"
#include "reshard/text.hpp"

namespace reshard::detail {
namespace {

constexpr size_t kLine = 64;
constexpr std::uint64_t kMagic = 0x31584f424d485352ull;  // "RSHMBOX1"
constexpr char kPrefix[] = "/reshard-mailbox-";
constexpr size_t kNameHex = 32;
constexpr size_t kNameBytes = 64;  // the name as gathered: kPrefix, kNameHex hex digits, zero padding

struct Header {
  std::uint64_t magic;
  std::uint64_t size;
  std::uint64_t capacity;
};

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

std::string random_name() {
  std::random_device rd;  // the OS's entropy source (getrandom) on Linux
  static constexpr char kHex[] = "0123456789abcdef";
  std::string name = kPrefix;
  for (size_t i = 0; i < kNameHex; ++i) name += kHex[rd() & 15u];
  return name;
}

// Only names this code makes: anything else a peer sent is refused before it reaches shm_open.
bool valid_name(const char* name) {
  const size_t len = strnlen(name, kNameBytes);
  const size_t prefix = sizeof(kPrefix) - 1;
  if (len != prefix + kNameHex || std::strncmp(name, kPrefix, prefix) != 0) return false;
  for (size_t i = prefix; i < len; ++i)
    if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f'))) return false;
  return true;
}

// The mapping of one rank; unmapped unless released to a HostMailbox.
struct Mapping {
  void* data = MAP_FAILED;
  size_t bytes = 0;
  Mapping() = default;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    if (data != MAP_FAILED) ::munmap(data, bytes);
  }
  bool map(int fd, size_t n) {
    data = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    bytes = n;
    return data != MAP_FAILED;
  }
};

bool create(const std::string& name, size_t bytes, Mapping& m) {
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, S_IRUSR | S_IWUSR);
  if (fd < 0) return false;
  const bool ok = ::ftruncate(fd, static_cast<off_t>(bytes)) == 0 && m.map(fd, bytes);
  ::close(fd);
  if (!ok) ::shm_unlink(name.c_str());  // created but not usable: leave nothing behind
  return ok;
}

// Opens a segment another rank created, refusing one that is not exactly what that rank would have made.
bool open_existing(const char* name, size_t bytes, const Header& want, Mapping& m) {
  const int fd = ::shm_open(name, O_RDWR, 0);
  if (fd < 0) return false;
  struct stat st {};
  const bool ours = ::fstat(fd, &st) == 0 && st.st_uid == ::geteuid() && (st.st_mode & 0777) == 0600 &&
                    static_cast<size_t>(st.st_size) == bytes;
  const bool ok = ours && m.map(fd, bytes);
  ::close(fd);
  if (!ok) return false;
  Header h;
  std::memcpy(&h, m.data, sizeof h);
  return h.magic == want.magic && h.size == want.size && h.capacity == want.capacity;
}

}  // namespace

std::uint64_t machine_id() {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a
  auto mix = [&](const char* text, size_t n) {
    for (size_t i = 0; i < n && text[i]; ++i) h = (h ^ static_cast<unsigned char>(text[i])) * 1099511628211ull;
  };
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  mix(name, sizeof name);
  if (std::FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    char boot[64] = {};
    const size_t n = std::fread(boot, 1, sizeof(boot) - 1, f);
    std::fclose(f);
    mix(boot, n);
  }
  return h;
}

std::unique_ptr<HostMailbox> HostMailbox::connect(int rank, int size, size_t capacity, const Gather& gather) {
  RESHARD_REQUIRE(size >= 1 && size <= kMaxRanks, "host mailbox: ", size, " ranks (at most ", kMaxRanks, ")");
  RESHARD_REQUIRE(rank >= 0 && rank < size, "host mailbox: rank ", rank, " of ", size);
  RESHARD_REQUIRE(capacity >= 1 && capacity <= kMaxRecordBytes, "host mailbox: records of ", capacity, " bytes (1 to ",
                  kMaxRecordBytes, ")");
  const size_t cap = round_up(capacity, kLine);
  const size_t stride = kLine + 2 * cap;
  const size_t bytes = kLine + static_cast<size_t>(size) * stride;  // at most ~128 MiB by the limits above
  const Header header{kMagic, static_cast<std::uint64_t>(size), static_cast<std::uint64_t>(capacity)};

  auto mapping = std::make_unique<Mapping>();
  std::string created;
  char name[kNameBytes] = {};
  if (rank == 0) {
    // Whatever fails here (no entropy source, no /dev/shm) must still reach the gathers below: the other ranks are
    // already in them.
    try {
      const std::string candidate = random_name();
      if (create(candidate, bytes, *mapping)) {
        created = candidate;
        std::memcpy(mapping->data, &header, sizeof header);
        std::memcpy(name, candidate.c_str(), candidate.size());
      }
    } catch (const std::exception&) {
      created.clear();
    }
  }
  // Rank 0 unlinks the name on every path once the second gather is behind it (or an exception leaves).
  struct Unlink {
    const std::string& name;
    ~Unlink() {
      if (!name.empty()) ::shm_unlink(name.c_str());
    }
  } unlink{created};
  std::vector<char> names(static_cast<size_t>(size) * kNameBytes);
  gather(name, names.data(), kNameBytes);
  const char* theirs = names.data();  // rank 0's
  char ok = 0;
  if (rank == 0) {
    ok = created.empty() ? 0 : 1;
  } else {
    char bounded[kNameBytes + 1] = {};
    std::memcpy(bounded, theirs, kNameBytes);
    ok = valid_name(bounded) && open_existing(bounded, bytes, header, *mapping) ? 1 : 0;
  }
  std::vector<char> oks(static_cast<size_t>(size));
  gather(&ok, oks.data(), 1);
  for (char o : oks)
    if (o != 1) return nullptr;
  std::unique_ptr<HostMailbox> box(new HostMailbox(rank, size, capacity, mapping->data, bytes));
  mapping->data = MAP_FAILED;  // the mailbox owns the mapping now
  return box;
}

HostMailbox::HostMailbox(int rank, int size, size_t capacity, void* map, size_t map_bytes)
    : rank_(rank),
      size_(size),
      capacity_(capacity),
      record_bytes_(round_up(capacity, kLine)),
      stride_(kLine + 2 * record_bytes_),
      map_(map),
      map_bytes_(map_bytes) {}

HostMailbox::~HostMailbox() { ::munmap(map_, map_bytes_); }

std::uint64_t* HostMailbox::number(int rank) const {
  return reinterpret_cast<std::uint64_t*>(static_cast<std::byte*>(map_) + kLine + static_cast<size_t>(rank) * stride_);
}

std::byte* HostMailbox::record(int rank, std::uint64_t call) const {
  return reinterpret_cast<std::byte*>(number(rank)) + kLine + (call & 1u) * record_bytes_;
}

void HostMailbox::all_gather(const void* send, void* recv, size_t bytes, std::chrono::milliseconds timeout,
                             const std::function<bool()>& stop) {
  if (!broken_.empty()) fail(ErrorKind::kBackend, cat("host all-gather: ", broken_));
  RESHARD_REQUIRE(bytes <= capacity_, "host all-gather of ", bytes, " bytes; the mailbox holds ", capacity_);
  const std::uint64_t call = ++calls_;
  auto* out = static_cast<std::byte*>(recv);
  if (bytes > 0) {
    std::memcpy(record(rank_, call), send, bytes);
    std::memcpy(out + static_cast<size_t>(rank_) * bytes, send, bytes);
  }
  std::atomic_ref<std::uint64_t>(*number(rank_)).store(call, std::memory_order_release);

  PollPacing pace;
  const auto deadline = pace.start() + timeout;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    std::atomic_ref<std::uint64_t> theirs(*number(p));
    while (true) {
      const std::uint64_t n = theirs.load(std::memory_order_acquire);
      if (n == call || n == call + 1) break;
      if (n > call + 1) {
        broken_ = cat("rank ", p, " published call ", n, " while rank ", rank_, " is in call ", call,
                      " (not a peer in step)");
        fail(ErrorKind::kBackend, cat("host all-gather: ", broken_));
      }
      if (!pace.checks_due()) {  // spinning; yielding lets ranks that share a core (threads, oversubscribed) arrive
        std::this_thread::yield();
        continue;
      }
      if (PollPacing::Clock::now() > deadline) {
        std::string missing;
        for (int q = 0; q < size_; ++q)
          if (q != rank_ && std::atomic_ref<std::uint64_t>(*number(q)).load(std::memory_order_acquire) < call)
            missing += cat(missing.empty() ? "" : ", ", q);
        broken_ = cat("rank ", rank_, " waited ", timeout.count(), " ms in call ", call, " for rank(s) ", missing);
        fail(ErrorKind::kTimeout, cat("host all-gather: ", broken_, " (a peer stopped or runs another plan?)"));
      }
      if (stop && stop()) {
        broken_ = cat("rank ", rank_, " gave up in call ", call, " (its communicator was aborted)");
        fail(ErrorKind::kBackend, cat("host all-gather: ", broken_));
      }
      pace.rest();
    }
    if (bytes > 0) std::memcpy(out + static_cast<size_t>(p) * bytes, record(p, call), bytes);
  }
}

}  // namespace reshard::detail
