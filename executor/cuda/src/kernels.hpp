// Plain-data interface between the C++20 CUDA backend and its kernels (compiled as C++17 by nvcc).
#pragma once

#include <cuda_runtime.h>

#include "reshard/dtype.hpp"

namespace reshard::cuda {

constexpr int kMaxOuterDims = 7;
// A batch's buffers: this rank's input, output and workspace (codes 0, 1, 2), then the others it names (peers' for
// one-sided steps, a batch program's other tensors), codes 3 and up in first-use order (device_bases.hpp).
constexpr int kMaxPeerSlots = 15;
constexpr int kMaxBases = 3 * (1 + kMaxPeerSlots);
// A copy kernel's table may be wide: this rank's three buffers and up to kMaxCopyBases - 3 others, so that one launch
// copies a step of a batch of hundreds of tensors (8 KiB of kernel parameters; a launch that names at most kMaxBases
// buffers takes the kernel with the short table).
constexpr int kMaxCopyBases = 1024;

// One copy region in bytes: rows of `row_bytes` contiguous bytes, indexed row-major over the outer dims.
struct DeviceCopyRegion {
  int src_buffer = 0;  // buffer code (DeviceBases)
  int dst_buffer = 0;
  int outer_dims = 0;
  long long src_offset = 0, dst_offset = 0;
  long long row_bytes = 0;
  long long outer_shape[kMaxOuterDims] = {};
  long long src_stride[kMaxOuterDims] = {}, dst_stride[kMaxOuterDims] = {};
  unsigned int align = 1;  // power of two dividing every offset, stride and row length (bytes), at most 16
  // 1: a region of a converting batch that writes an output buffer: its source elements (row_bytes and the tiles'
  // columns count their bytes) are stored converted; dst_offset and dst_stride count the output dtype's bytes.
  int convert = 0;
};

// A block's share of a region: rows [row_begin, row_end), bytes [col_begin, col_end) of each row.
struct DeviceCopyTile {
  int region = 0;
  long long row_begin = 0, row_end = 0;
  long long col_begin = 0, col_end = 0;
};

template <int N>
struct DeviceBasesOf {
  static constexpr int kSize = N;
  const void* ptr[N] = {};
};
using DeviceBases = DeviceBasesOf<kMaxBases>;
using DeviceWideBases = DeviceBasesOf<kMaxCopyBases>;

// The flags of a fused one-sided step (one kernel per rank per call). Epochs count the step's calls: a call posts its
// epoch into the peers' slots for this rank (ready to its readers, done to its sources) and waits until its own slots
// for its sources (ready) and readers (done) reach it, on the GPU, giving up after timeout_ns.
struct FusedSync {
  unsigned long long* notify_ready[kMaxPeerSlots] = {};
  unsigned long long* notify_done[kMaxPeerSlots] = {};
  const unsigned long long* await_ready[kMaxPeerSlots] = {};
  const unsigned long long* await_done[kMaxPeerSlots] = {};
  int notify_ready_count = 0, notify_done_count = 0, await_ready_count = 0, await_done_count = 0;
  unsigned long long* state = nullptr;  // device: [0] calls completed, [1] blocks finished in the current call
  int* error = nullptr;                 // host-mapped: set to 1 when a wait gave up
  unsigned long long timeout_ns = 0;
};

// Threads per block of every copy, reduction and fused kernel.
constexpr int kThreads = 256;

// At least 4 blocks per SM (64 registers a thread) for the fused kernels: ranks sharing a GPU (the shared-GPU tests
// run 4) each launch up to one block per SM, and their blocks wait for each other's posts, so all of them must be
// resident at once.
constexpr int kFusedBlocksPerSm = 4;

// The fused step: post ready, wait for the sources, copy every tile (peer pulls and local copies), post done, wait
// for the readers; `blocks` blocks (at least one, even with no tiles: the flags still flow).
cudaError_t launch_fused(const DeviceCopyRegion* regions, const DeviceCopyTile* tiles, int tile_count, int blocks,
                         DeviceBases bases, const FusedSync& sync, cudaStream_t stream);

// Loads the copy and fused kernels into the current device's context now (cudaFuncGetAttributes), not lazily at
// their first launch: under CUDA_MODULE_LOADING=LAZY (PyTorch's default) a first launch may synchronise the whole
// context, which would wait for streams held by one-sided waits on peers.
cudaError_t load_copy_kernels();

// max_blocks > 0 caps the grid (blocks then walk several tiles), leaving SMs to work running alongside.
cudaError_t launch_copies(const DeviceCopyRegion* regions, const DeviceCopyTile* tiles, int tile_count, int max_blocks,
                          const DeviceBases& bases, cudaStream_t stream);
cudaError_t launch_copies(const DeviceCopyRegion* regions, const DeviceCopyTile* tiles, int tile_count, int max_blocks,
                          const DeviceWideBases& bases, cudaStream_t stream);

// Loads the converting kernels of the pair now (as load_copy_kernels; cudaErrorInvalidValue for a pair that does not
// convert).
cudaError_t load_converting_kernels(DType from, DType to);
// The same for a converting batch (convert_kernels.cu): regions marked `convert` store elements of `from` as `to`
// (reshard/dtype_convert.hpp's rules), the others copy bytes. cudaErrorInvalidValue for a pair that does not convert.
// Always the wide table (a batch of many tensors names many buffers): one instance per pair, not two.
cudaError_t launch_converting_copies(DType from, DType to, const DeviceCopyRegion* regions, const DeviceCopyTile* tiles,
                                     int tile_count, int max_blocks, const DeviceWideBases& bases, cudaStream_t stream);
cudaError_t launch_converting_fused(DType from, DType to, const DeviceCopyRegion* regions, const DeviceCopyTile* tiles,
                                    int tile_count, int blocks, DeviceBases bases, const FusedSync& sync,
                                    cudaStream_t stream);
// block_scale_cuda.hpp's kernel on `tiles` = grid rows x grid_cols thread blocks (the caller has checked the pair, the
// block and the shape); cudaErrorInvalidValue for a pair it does not quantize.
cudaError_t launch_quantize_blocks(const void* in, DType from, long long rows, long long cols, void* out, DType to,
                                   float* scale_inv, int block, long long grid_cols, unsigned tiles,
                                   cudaStream_t stream);

}  // namespace reshard::cuda
