// A PeerLink that forwards every call to another one: tests derive from it and override the calls they observe or
// change (which peers the copy engines reach, how often buffers are exposed).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "reshard/backend.hpp"

namespace reshard::testing {

class ForwardingPeerLink : public PeerLink {
 public:
  explicit ForwardingPeerLink(std::unique_ptr<PeerLink> inner) : inner_(std::move(inner)) {}
  bool expose(const ExposedBuffers& mine) override { return inner_->expose(mine); }
  PeerTables tables() const override { return inner_->tables(); }
  void require(int peer) const override { inner_->require(peer); }
  bool copy_engines_reach(int peer) const override { return inner_->copy_engines_reach(peer); }
  void sync(const PeerSync& sync, StreamHandle stream) override { inner_->sync(sync, stream); }
  std::string release() override { return inner_->release(); }
  std::unique_ptr<CopyBatch> prepare_fused(const FusedPeerStep& op, DType dtype, std::chrono::milliseconds t) override {
    return inner_->prepare_fused(op, dtype, t);
  }
  void check() override { inner_->check(); }

 private:
  std::unique_ptr<PeerLink> inner_;
};

}  // namespace reshard::testing
