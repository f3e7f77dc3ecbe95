// A small map for the planner's per-planning caches (internal): values at stable addresses (blocks of kBlock entries),
// found through an open-addressing table of (hash, index). A planning meets a few dozen layouts and steps and looks
// them up in its inner loops; std::unordered_map allocated a node per entry and rehashed as it grew, and a deque
// allocated one per entry of a few hundred bytes (a step's key).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace reshard::detail {

// Storage of the planner's per-planning tables, kept on this thread for the next planning: a small plan builds a
// dozen maps of one to a few kilobytes each, beyond the sizes the allocator caches per thread, and took them from
// (and returned them to) its shared bins every time. Blocks of one size are kept up to kKept at a time, blocks of at
// most kMaxBytes, of at most kSizes sizes; others go to the allocator.
class KeptStorage {
 public:
  static void* take(std::size_t bytes) {
    if (bytes <= kMaxBytes)
      for (List& l : lists().list)
        if (l.bytes == bytes && l.n > 0) return l.p[--l.n];
    return ::operator new(bytes);
  }
  static void give(void* p, std::size_t bytes) noexcept {
    if (bytes <= kMaxBytes) {
      for (List& l : lists().list) {
        if (l.bytes == 0) l.bytes = bytes;  // a size met for the first time takes a free list
        if (l.bytes != bytes) continue;
        if (l.n == kKept) break;
        l.p[l.n++] = p;
        return;
      }
    }
    ::operator delete(p);
  }

 private:
  static constexpr std::size_t kMaxBytes = std::size_t{64} << 10;
  static constexpr int kKept = 16, kSizes = 12;
  struct List {
    std::size_t bytes = 0;
    int n = 0;
    void* p[kKept];
  };
  struct Lists {
    List list[kSizes];
    ~Lists() {
      for (List& l : list)
        for (int i = 0; i < l.n; ++i) ::operator delete(l.p[i]);
    }
  };
  static Lists& lists() {
    thread_local Lists l;
    return l;
  }
};

// K: equality-comparable; Hash: K -> std::size_t. Entries are never erased.
template <class K, class V, class Hash>
class FlatMap {
 public:
  FlatMap() { alloc_slots(64); }
  FlatMap(const FlatMap&) = delete;
  FlatMap& operator=(const FlatMap&) = delete;
  ~FlatMap() {
    for (std::size_t i = 0; i < size_; ++i) entry(i).~Entry();
    for (Block* b : blocks_) KeptStorage::give(b, sizeof(Block));
    KeptStorage::give(slots_, n_slots_ * sizeof(Slot));
  }

  V* find(const K& key) {
    const std::size_t h = Hash()(key);
    const Slot& s = slots_[locate(key, h)];
    return s.index < 0 ? nullptr : &entry(static_cast<std::size_t>(s.index)).second;
  }

  // The value of `key`, default-constructed (or made by make()) when it is new.
  template <class Make>
  V& get_or(const K& key, Make&& make) {
    const std::size_t h = Hash()(key);
    std::size_t at = locate(key, h);
    if (slots_[at].index >= 0) return entry(static_cast<std::size_t>(slots_[at].index)).second;
    V value = make();  // may throw: nothing is inserted then
    if (size_ == blocks_.size() * kBlock) {
      blocks_.reserve(blocks_.size() + 1);  // push_back cannot throw once the block is taken
      blocks_.push_back(static_cast<Block*>(KeptStorage::take(sizeof(Block))));  // not zeroed
    }
    if (2 * (size_ + 1) > n_slots_) {
      grow();
      at = locate(key, h);
    }
    Entry* e = new (blocks_.back()->bytes + size_ % kBlock * sizeof(Entry)) Entry(key, std::move(value));
    slots_[at] = Slot{h, static_cast<std::int64_t>(size_++)};
    return e->second;
  }
  V& operator[](const K& key) {
    return get_or(key, [] { return V(); });
  }

 private:
  using Entry = std::pair<K, V>;
  static constexpr std::size_t kBlock = 16;
  struct Block {  // storage for kBlock entries, constructed in place as they come
    alignas(Entry) unsigned char bytes[kBlock * sizeof(Entry)];
  };
  static_assert(alignof(Block) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__, "KeptStorage hands out operator new's alignment");
  Entry& entry(std::size_t i) const {
    return *std::launder(reinterpret_cast<Entry*>(blocks_[i / kBlock]->bytes + i % kBlock * sizeof(Entry)));
  }

  struct Slot {
    std::size_t hash = 0;
    std::int64_t index = -1;
  };
  // The slot holding `key`, or the empty one where it would go.
  std::size_t locate(const K& key, std::size_t h) const {
    const std::size_t mask = n_slots_ - 1;
    std::size_t at = (h * 0x9E3779B97F4A7C15ull) >> 7 & mask;
    while (slots_[at].index >= 0 &&
           !(slots_[at].hash == h && entry(static_cast<std::size_t>(slots_[at].index)).first == key))
      at = (at + 1) & mask;
    return at;
  }
  void alloc_slots(std::size_t n) {
    slots_ = static_cast<Slot*>(KeptStorage::take(n * sizeof(Slot)));
    n_slots_ = n;
    for (std::size_t i = 0; i < n; ++i) new (slots_ + i) Slot();
  }
  void grow() {
    Slot* old = slots_;
    const std::size_t n_old = n_slots_;
    alloc_slots(n_old * 2);
    const std::size_t mask = n_slots_ - 1;
    for (std::size_t i = 0; i < n_old; ++i) {
      const Slot& s = old[i];
      if (s.index < 0) continue;
      std::size_t at = (s.hash * 0x9E3779B97F4A7C15ull) >> 7 & mask;
      while (slots_[at].index >= 0) at = (at + 1) & mask;
      slots_[at] = s;
    }
    KeptStorage::give(old, n_old * sizeof(Slot));
  }
  Slot* slots_ = nullptr;  // n_slots_ of them (a power of two), from KeptStorage
  std::size_t n_slots_ = 0;
  std::vector<Block*> blocks_;  // from KeptStorage
  std::size_t size_ = 0;
};

}  // namespace reshard::detail
