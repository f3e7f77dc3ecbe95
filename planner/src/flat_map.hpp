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

// K: equality-comparable; Hash: K -> std::size_t. Entries are never erased.
template <class K, class V, class Hash>
class FlatMap {
 public:
  FlatMap() : slots_(64) {}
  FlatMap(const FlatMap&) = delete;
  FlatMap& operator=(const FlatMap&) = delete;
  ~FlatMap() {
    for (std::size_t i = 0; i < size_; ++i) entry(i).~Entry();
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
    if (size_ == blocks_.size() * kBlock) blocks_.push_back(std::unique_ptr<Block>(new Block));  // not zeroed
    if (2 * (size_ + 1) > slots_.size()) {
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
  Entry& entry(std::size_t i) const {
    return *std::launder(reinterpret_cast<Entry*>(blocks_[i / kBlock]->bytes + i % kBlock * sizeof(Entry)));
  }

  struct Slot {
    std::size_t hash = 0;
    std::int64_t index = -1;
  };
  // The slot holding `key`, or the empty one where it would go.
  std::size_t locate(const K& key, std::size_t h) const {
    const std::size_t mask = slots_.size() - 1;
    std::size_t at = (h * 0x9E3779B97F4A7C15ull) >> 7 & mask;
    while (slots_[at].index >= 0 &&
           !(slots_[at].hash == h && entry(static_cast<std::size_t>(slots_[at].index)).first == key))
      at = (at + 1) & mask;
    return at;
  }
  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    const std::size_t mask = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.index < 0) continue;
      std::size_t at = (s.hash * 0x9E3779B97F4A7C15ull) >> 7 & mask;
      while (slots_[at].index >= 0) at = (at + 1) & mask;
      slots_[at] = s;
    }
  }
  std::vector<Slot> slots_;
  std::vector<std::unique_ptr<Block>> blocks_;
  std::size_t size_ = 0;
};

}  // namespace reshard::detail
