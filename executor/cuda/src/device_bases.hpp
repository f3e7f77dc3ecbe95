// The kernels' view of a run's buffers (internal to the CUDA backend): this rank's three, and the other buffers a
// batch names (peers' buffers that it reads one-sided, a batch program's other tensors), each under a small integer
// code.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "kernels.hpp"
#include "reshard/backend.hpp"

namespace reshard::cuda {

// Assigns buffer codes to the references of one batch (prepare time) and fills the kernels' table from a run's
// bases (run time: a few pointer copies, no allocation).
class BaseTable {
 public:
  // At most `capacity` codes in all (kMaxBases for the fused and reduction kernels, kMaxCopyBases for copy kernels).
  explicit BaseTable(int capacity = kMaxBases) : capacity_(capacity) {}
  // Codes in use: this rank's three and the others named so far.
  int size() const { return 3 + static_cast<int>(keys_.size()); }

  // The code of `ref`'s buffer: 0..2 for this rank's input and output (tensor 0's) and workspace; the next free code
  // (3 and up, at most kMaxBases) for any other: a peer's buffer, another tensor's input or output.
  int code(const BufferRef& ref) {
    if (fixed(ref)) return static_cast<int>(ref.buffer);
    const Key k = key_of(ref);
    for (size_t i = 0; i < keys_.size(); ++i)
      if (keys_[i] == k) return 3 + static_cast<int>(i);
    RESHARD_REQUIRE(size() < capacity_, "a copy batch names more than ", capacity_ - 3,
                    " buffers besides this rank's own");
    keys_.push_back(k);
    return 2 + static_cast<int>(keys_.size());
  }

  // Adds the codes of every reference when they all fit; false (adding none) when they do not.
  bool try_add(std::span<const BufferRef> refs) {
    std::vector<Key> added;
    for (const BufferRef& r : refs) {
      if (fixed(r)) continue;
      const Key k = key_of(r);
      bool known = false;
      for (const Key& x : keys_) known = known || x == k;
      for (const Key& x : added) known = known || x == k;
      if (!known) added.push_back(k);
    }
    if (size() + static_cast<int>(added.size()) > capacity_) return false;
    keys_.insert(keys_.end(), added.begin(), added.end());
    return true;
  }

  // The kernels' table of a run; Bases must hold size() codes (checked).
  template <class Bases = DeviceBases>
  Bases fill(const BufferBases& b) const {
    RESHARD_REQUIRE(size() <= Bases::kSize, "internal: ", size(), " buffer codes for a table of ", Bases::kSize);
    Bases d;
    d.ptr[0] = b.input;
    d.ptr[1] = b.output;
    d.ptr[2] = b.work;
    for (size_t i = 0; i < keys_.size(); ++i) {
      const Key& k = keys_[i];
      const void* p = nullptr;
      if (k.peer >= 0) {
        p = address_of(b, BufferRef{static_cast<Buffer>(k.buffer), 0, k.peer, k.tensor}, 1);
      } else {
        p = k.buffer == 0 ? b.inputs[k.tensor] : b.outputs[k.tensor];
      }
      d.ptr[3 + i] = p;
    }
    return d;
  }

 private:
  struct Key {
    int peer = -1, buffer = 0, tensor = 0;
    friend bool operator==(const Key&, const Key&) = default;
  };
  static bool fixed(const BufferRef& r) { return r.peer < 0 && (r.tensor == 0 || r.buffer == Buffer::kWork); }
  static Key key_of(const BufferRef& r) {
    return Key{r.peer, static_cast<int>(r.buffer), r.buffer == Buffer::kWork && r.peer < 0 ? 0 : r.tensor};
  }
  int capacity_;
  std::vector<Key> keys_;
};

// Splits `regions` into consecutive groups whose buffers fit one BaseTable each (a batch program's copies may name
// more tensors than one launch's table holds). `refs(region)` gives a region's buffer references.
template <class Region, class Refs>
std::vector<std::vector<Region>> split_by_bases(const std::vector<Region>& regions, Refs refs,
                                                int capacity = kMaxBases) {
  std::vector<std::vector<Region>> groups(1);
  BaseTable table(capacity);
  for (const Region& r : regions) {
    const std::vector<BufferRef> names = refs(r);
    if (!table.try_add(names)) {
      groups.emplace_back();
      table = BaseTable(capacity);
      RESHARD_REQUIRE(table.try_add(names), "a copy region names more than ", capacity - 3, " buffers");
    }
    groups.back().push_back(r);
  }
  return groups;
}

// Several batches run one after the other on one stream (the groups of split_by_bases).
class SplitBatch : public CopyBatch {
 public:
  explicit SplitBatch(std::vector<std::unique_ptr<CopyBatch>> parts) : parts_(std::move(parts)) {}
  void run(const BufferBases& b, StreamHandle stream) override {
    for (auto& p : parts_) p->run(b, stream);
  }

 private:
  std::vector<std::unique_ptr<CopyBatch>> parts_;
};

}  // namespace reshard::cuda
