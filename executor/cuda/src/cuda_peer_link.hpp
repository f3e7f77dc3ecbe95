// The CUDA device's PeerLink (internal to the CUDA backend): see cuda_peer_link.cpp.
#pragma once

#include <memory>

#include "reshard/backend.hpp"

namespace reshard::cuda {

// Collective over `comm`: maps the flags of every rank on this host whose GPU this one (`ordinal`) can access.
std::unique_ptr<PeerLink> connect_cuda_peers(Communicator& comm, Device& device, int ordinal);

}  // namespace reshard::cuda
