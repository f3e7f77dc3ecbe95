// The copy kernels' shared device code: a block copies its tiles (internal to the CUDA backend).
#pragma once

#include "kernels.hpp"

namespace reshard::cuda {

constexpr int kThreads = 256;

// Copies one tile with `Unit`-sized accesses. Wide rows: the block walks the rows and its threads stride along
// each row, four independent loads in flight per thread. Narrow rows: threads take (row, unit) pairs.
template <class Unit>
__device__ inline void copy_tile(const DeviceCopyRegion& r, const DeviceCopyTile& t, const char* src, char* dst) {
  constexpr int kUnroll = 4;
  const long long units_per_row = (t.col_end - t.col_begin) / static_cast<long long>(sizeof(Unit));
  const int outer = r.outer_dims;
  auto row_offsets = [&](long long row, long long& so, long long& dof) {
    so = 0;
    dof = 0;
    for (int d = outer - 1; d >= 0; --d) {
      long long idx = row % r.outer_shape[d];
      row /= r.outer_shape[d];
      so += idx * r.src_stride[d];
      dof += idx * r.dst_stride[d];
    }
  };
  if (units_per_row >= kThreads) {
    for (long long row = t.row_begin; row < t.row_end; ++row) {
      long long so, dof;
      row_offsets(row, so, dof);
      const Unit* s = reinterpret_cast<const Unit*>(src + so + t.col_begin);
      Unit* d = reinterpret_cast<Unit*>(dst + dof + t.col_begin);
      long long u = threadIdx.x;
      for (; u + (kUnroll - 1) * kThreads < units_per_row; u += kUnroll * kThreads) {
        Unit v[kUnroll];
#pragma unroll
        for (int k = 0; k < kUnroll; ++k) v[k] = s[u + k * kThreads];
#pragma unroll
        for (int k = 0; k < kUnroll; ++k) d[u + k * kThreads] = v[k];
      }
      for (; u < units_per_row; u += kThreads) d[u] = s[u];
    }
  } else {
    // Narrow rows: kUnroll independent loads in flight per thread too (a peer's memory over NVLink is a long
    // round trip; one load at a time made a 2 KiB-row tile cost a round trip per 4 KiB).
    const long long total = (t.row_end - t.row_begin) * units_per_row;
    auto at = [&](long long u, const Unit*& s, Unit*& d) {
      const long long row = t.row_begin + u / units_per_row, col = u % units_per_row;
      long long so, dof;
      row_offsets(row, so, dof);
      s = reinterpret_cast<const Unit*>(src + so + t.col_begin) + col;
      d = reinterpret_cast<Unit*>(dst + dof + t.col_begin) + col;
    };
    long long u = threadIdx.x;
    for (; u + (kUnroll - 1) * kThreads < total; u += kUnroll * kThreads) {
      Unit v[kUnroll];
      Unit* d[kUnroll];
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) {
        const Unit* s;
        at(u + k * kThreads, s, d[k]);
        v[k] = *s;
      }
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) *d[k] = v[k];
    }
    for (; u < total; u += kThreads) {
      const Unit* s;
      Unit* d;
      at(u, s, d);
      *d = *s;
    }
  }
}

// Every block walks tiles grid-stride: tile ti goes to block ti mod gridDim.x.
__device__ inline void copy_tiles(const DeviceCopyRegion* regions, const DeviceCopyTile* tiles, int tile_count,
                                  const DeviceBases& bases) {
  __shared__ DeviceCopyRegion region;
  __shared__ DeviceCopyTile tile;
  for (int ti = blockIdx.x; ti < tile_count; ti += gridDim.x) {
    __syncthreads();
    if (threadIdx.x == 0) {
      tile = tiles[ti];
      region = regions[tile.region];
    }
    __syncthreads();
    const DeviceCopyRegion r = region;
    const DeviceCopyTile t = tile;
    const char* src = static_cast<const char*>(bases.ptr[r.src_buffer]) + r.src_offset;
    char* dst = static_cast<char*>(const_cast<void*>(bases.ptr[r.dst_buffer])) + r.dst_offset;
    // The widest unit that every address and length of this tile allows (block-uniform).
    unsigned long long a = r.align | reinterpret_cast<unsigned long long>(src) |
                           reinterpret_cast<unsigned long long>(dst) | static_cast<unsigned long long>(t.col_begin) |
                           static_cast<unsigned long long>(t.col_end);
    if ((a & 15) == 0)
      copy_tile<uint4>(r, t, src, dst);
    else if ((a & 7) == 0)
      copy_tile<uint2>(r, t, src, dst);
    else if ((a & 3) == 0)
      copy_tile<unsigned int>(r, t, src, dst);
    else if ((a & 1) == 0)
      copy_tile<unsigned short>(r, t, src, dst);
    else
      copy_tile<unsigned char>(r, t, src, dst);
  }
}

}  // namespace reshard::cuda
