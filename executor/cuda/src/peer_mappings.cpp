#include "peer_mappings.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "driver_api.hpp"
#include "reshard/error.hpp"

namespace reshard::cuda {

bool OwnedAllocations::name(const void* ptr, BufferName& out, std::vector<Publication>& fresh,
                            std::vector<std::uint64_t>& retired) {
  out = BufferName{};
  if (ptr == nullptr) return true;
  CUdeviceptr base = 0;
  size_t bytes = 0;
  unsigned long long id = 0;
  CUpointer_attribute attributes[] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                                      CU_POINTER_ATTRIBUTE_BUFFER_ID};
  void* values[] = {&base, &bytes, &id};
  RESHARD_CU_CHECK(driver_api().pointer_get_attributes(3, attributes, values, reinterpret_cast<CUdeviceptr>(ptr)));
  RESHARD_REQUIRE(base != 0 && id != 0, "buffer ", ptr, " is not memory of a CUDA allocation");
  out = BufferName{id, reinterpret_cast<std::uint64_t>(ptr) - base};
  auto it = by_id_.find(id);
  if (it != by_id_.end()) {
    it->second.used = exposure_;
    return true;
  }
  Publication pub{id, base, bytes};
  if (handles_ && cudaIpcGetMemHandle(&pub.handle, reinterpret_cast<void*>(base)) != cudaSuccess) {
    cudaGetLastError();
    out = BufferName{};
    return false;
  }
  // A new allocation over addresses of a published one: that one was freed.
  auto first = by_base_.lower_bound(base);
  if (first != by_base_.begin()) --first;
  std::vector<std::uint64_t> covered;
  for (auto b = first; b != by_base_.end() && b->first < base + bytes; ++b) {
    const Entry& e = by_id_.at(b->second);
    if (e.base + e.bytes > base) covered.push_back(b->second);
  }
  for (std::uint64_t old : covered) drop(old, retired);
  by_id_.emplace(id, Entry{base, bytes, exposure_});
  by_base_[base] = id;
  fresh.push_back(pub);
  return true;
}

void OwnedAllocations::drop(std::uint64_t id, std::vector<std::uint64_t>& retired) {
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return;
  auto b = by_base_.find(it->second.base);
  if (b != by_base_.end() && b->second == id) by_base_.erase(b);
  by_id_.erase(it);
  retired.push_back(id);
}

void OwnedAllocations::end(std::vector<std::uint64_t>& retired) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> stale;  // (last exposure, id)
  std::uint64_t stale_bytes = 0;
  for (const auto& [id, e] : by_id_) {
    if (e.used == exposure_) continue;
    stale.emplace_back(e.used, id);
    stale_bytes += e.bytes;
  }
  if (stale.size() <= stale_count_ && stale_bytes <= stale_bytes_) return;
  std::sort(stale.begin(), stale.end());
  size_t count = stale.size();
  for (const auto& [used, id] : stale) {
    if (count <= stale_count_ && stale_bytes <= stale_bytes_) break;
    stale_bytes -= by_id_.at(id).bytes;
    --count;
    drop(id, retired);
  }
}

PeerAllocations::~PeerAllocations() {
  for (auto& peer : peers_)
    for (auto& [id, known] : peer)
      if (known.mapped) cudaIpcCloseMemHandle(known.mapped);
}

void PeerAllocations::learn(int peer, std::span<const Publication> fresh) {
  auto& known = peers_.at(static_cast<size_t>(peer));
  for (const Publication& p : fresh) {
    RESHARD_REQUIRE(p.id != 0 && p.bytes > 0, "rank ", peer, " published an empty allocation");
    auto [it, added] = known.try_emplace(p.id);
    RESHARD_REQUIRE(added, "rank ", peer, " published allocation ", p.id, " twice");
    it->second.pub = p;
  }
}

void PeerAllocations::forget(int peer, std::span<const std::uint64_t> retired) {
  auto& known = peers_.at(static_cast<size_t>(peer));
  for (std::uint64_t id : retired) {
    auto it = known.find(id);
    if (it == known.end()) continue;
    if (it->second.mapped) {
      cudaIpcCloseMemHandle(it->second.mapped);
      --mapped_;
    }
    known.erase(it);
  }
}

void* PeerAllocations::address(int peer, const BufferName& name, bool same_process) {
  if (name.id == 0) return nullptr;
  auto& known = peers_.at(static_cast<size_t>(peer));
  auto it = known.find(name.id);
  RESHARD_REQUIRE(it != known.end(), "internal: rank ", peer, " exposed allocation ", name.id, " it never published");
  Known& k = it->second;
  RESHARD_REQUIRE(name.offset < k.pub.bytes, "internal: rank ", peer, " exposed offset ", name.offset,
                  " past its allocation of ", k.pub.bytes, " bytes");
  if (same_process) return reinterpret_cast<std::byte*>(k.pub.base) + name.offset;
  if (!k.mapped) {
    void* p = nullptr;
    cudaError_t e = cudaIpcOpenMemHandle(&p, k.pub.handle, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess) {
      cudaGetLastError();
      fail(ErrorKind::kBackend, cat("rank ", me_, " cannot map rank ", peer,
                                    "'s GPU memory (cudaIpcOpenMemHandle: ", cudaGetErrorString(e), ")"));
    }
    k.mapped = p;
    ++mapped_;
  }
  return static_cast<std::byte*>(k.mapped) + name.offset;
}

void gather_in_pieces(Communicator& comm, const std::byte* send, std::byte* recv, size_t bytes,
                      std::vector<std::byte>& piece) {
  constexpr size_t kPiece = 16 << 10;
  if (bytes <= kPiece) return comm.all_gather_host(send, recv, bytes);
  const size_t n = static_cast<size_t>(comm.size());
  piece.resize(kPiece * n);
  for (size_t off = 0; off < bytes; off += kPiece) {
    const size_t len = std::min(kPiece, bytes - off);
    comm.all_gather_host(send + off, piece.data(), len);
    for (size_t p = 0; p < n; ++p) std::memcpy(recv + p * bytes + off, piece.data() + p * len, len);
  }
}

}  // namespace reshard::cuda
