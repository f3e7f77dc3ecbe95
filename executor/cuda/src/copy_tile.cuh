// The copy kernels' shared device code: a block copies its tiles (internal to the CUDA backend).
#pragma once

#include <type_traits>

#include "kernels.hpp"
#include "reshard/dtype_convert.hpp"

namespace reshard::cuda {

// A unit's source and destination.
template <class Unit>
struct Pair {
  const Unit* first;
  Unit* second;
};

// Copies `total` units, unit u from at(u) (its source and destination addresses): each thread takes units threadIdx.x,
// + kThreads, ... in rounds of kUnroll whose loads are all issued before any store, predicated at the end, so a tile of
// up to kUnroll * kThreads units costs one round trip to a peer's memory over NVLink, not one per unit a thread copies.
template <class Unit, class Address>
__device__ inline void copy_units(long long total, Address at) {
  constexpr int kUnroll = 4;
  for (long long u = threadIdx.x; u < total; u += kUnroll * kThreads) {
    Unit v[kUnroll];
    // Predicated, not cut short: fully unrolled, v stays in registers; the destinations are computed again for the
    // stores rather than held (registers are short: 64 a thread, fused_kernel.cu).
#pragma unroll
    for (int k = 0; k < kUnroll; ++k)
      if (u + k * kThreads < total) v[k] = *at(u + k * kThreads).first;
#pragma unroll
    for (int k = 0; k < kUnroll; ++k)
      if (u + k * kThreads < total) *at(u + k * kThreads).second = v[k];
  }
}

// The byte offsets of row `row` of region `r` (rows indexed row-major over its outer dims) in its source and target.
__device__ inline void tile_row_offsets(const DeviceCopyRegion& r, long long row, long long& so, long long& dof) {
  so = 0;
  dof = 0;
  const int outer = r.outer_dims;
  for (int d = outer - 1; d > 0; --d) {
    long long idx = row % r.outer_shape[d];
    row /= r.outer_shape[d];
    so += idx * r.src_stride[d];
    dof += idx * r.dst_stride[d];
  }
  if (outer > 0) {  // the outermost index is what is left (rows lie within the region): no division
    so += row * r.src_stride[0];
    dof += row * r.dst_stride[0];
  }
}

// kConvertVector elements of T, aligned to their size: one load or store of a converting row's elements.
constexpr int kConvertVector = 8;
template <class T>
struct alignas(sizeof(T) * kConvertVector) ElementVector {
  T v[kConvertVector];
};

// Converts `n` elements of one row, the block's threads striding along it: vectors of kConvertVector elements where
// both row starts are aligned to them (block-uniform: one row for every thread), single elements for the rest.
template <class From, class To>
__device__ inline void convert_row(const From* s, To* d, long long n) {
  long long done = 0;
  if (reinterpret_cast<unsigned long long>(s) % sizeof(ElementVector<From>) == 0 &&
      reinterpret_cast<unsigned long long>(d) % sizeof(ElementVector<To>) == 0) {
    const long long vectors = n / kConvertVector;
    const auto* sv = reinterpret_cast<const ElementVector<From>*>(s);
    auto* dv = reinterpret_cast<ElementVector<To>*>(d);
    for (long long i = threadIdx.x; i < vectors; i += kThreads) {
      const ElementVector<From> in = sv[i];
      ElementVector<To> out;
#pragma unroll
      for (int k = 0; k < kConvertVector; ++k) out.v[k] = detail::convert_value<From, To>(in.v[k]);
      dv[i] = out;
    }
    done = vectors * kConvertVector;
  }
  for (long long c = done + threadIdx.x; c < n; c += kThreads) d[c] = detail::convert_value<From, To>(s[c]);
}

// Converts one tile of a `convert` region (detail::convert_value): the tile's columns count source bytes, its
// destination columns start at the same element in the target's bytes. Wide rows: the block walks the rows, converting
// each with convert_row; narrow rows: threads take (row, element) pairs across the tile.
template <class From, class To>
__device__ inline void convert_tile(const DeviceCopyRegion& r, const DeviceCopyTile& t, const char* src, char* dst) {
  const long long per_row = (t.col_end - t.col_begin) / static_cast<long long>(sizeof(From));
  const long long dst_col = t.col_begin / static_cast<long long>(sizeof(From)) * static_cast<long long>(sizeof(To));
  auto convert_at = [&](long long row, long long col) {
    long long so, dof;
    tile_row_offsets(r, row, so, dof);
    const From v = reinterpret_cast<const From*>(src + so + t.col_begin)[col];
    reinterpret_cast<To*>(dst + dof + dst_col)[col] = detail::convert_value<From, To>(v);
  };
  if (per_row >= kThreads) {
    for (long long row = t.row_begin; row < t.row_end; ++row) {
      long long so, dof;
      tile_row_offsets(r, row, so, dof);
      convert_row<From, To>(reinterpret_cast<const From*>(src + so + t.col_begin),
                            reinterpret_cast<To*>(dst + dof + dst_col), per_row);
    }
  } else {
    const long long total = (t.row_end - t.row_begin) * per_row;
    for (long long u = threadIdx.x; u < total; u += kThreads) convert_at(t.row_begin + u / per_row, u % per_row);
  }
}

// Copies one tile with `Unit`-sized accesses. Wide rows: the block walks the rows and its threads stride along
// each row. Narrow rows: threads take (row, unit) pairs across the tile.
template <class Unit>
__device__ inline void copy_tile(const DeviceCopyRegion& r, const DeviceCopyTile& t, const char* src, char* dst) {
  const long long units_per_row = (t.col_end - t.col_begin) / static_cast<long long>(sizeof(Unit));
  auto row_offsets = [&](long long row, long long& so, long long& dof) { tile_row_offsets(r, row, so, dof); };
  if (units_per_row >= kThreads) {
    for (long long row = t.row_begin; row < t.row_end; ++row) {
      long long so, dof;
      row_offsets(row, so, dof);
      const Unit* s = reinterpret_cast<const Unit*>(src + so + t.col_begin);
      Unit* d = reinterpret_cast<Unit*>(dst + dof + t.col_begin);
      copy_units<Unit>(units_per_row, [&](long long u) { return Pair<Unit>{s + u, d + u}; });
    }
  } else {
    // A tile holds at most its tile_bytes (kernel_copies.cpp: at most 64 KiB): 32-bit arithmetic within it.
    const int narrow = static_cast<int>(units_per_row);
    copy_units<Unit>((t.row_end - t.row_begin) * units_per_row, [&](long long u) {
      const int within = static_cast<int>(u);
      const long long row = t.row_begin + within / narrow;
      const int col = within % narrow;
      long long so, dof;
      row_offsets(row, so, dof);
      return Pair<Unit>{reinterpret_cast<const Unit*>(src + so + t.col_begin) + col,
                        reinterpret_cast<Unit*>(dst + dof + t.col_begin) + col};
    });
  }
}

// Every block walks tiles grid-stride (tile ti goes to block ti mod gridDim.x), each tile and its region read into
// shared memory (registers are short: 64 a thread); body(region, tile, src, dst) copies it, src and dst the region's
// first bytes.
template <class Bases, class Body>
__device__ inline void for_each_tile(const DeviceCopyRegion* regions, const DeviceCopyTile* tiles, int tile_count,
                                     const Bases& bases, Body body) {
  __shared__ DeviceCopyRegion region;
  __shared__ DeviceCopyTile tile;
  for (int ti = blockIdx.x; ti < tile_count; ti += gridDim.x) {
    __syncthreads();
    if (threadIdx.x == 0) {
      tile = tiles[ti];
      region = regions[tile.region];
    }
    __syncthreads();
    const char* src = static_cast<const char*>(bases.ptr[region.src_buffer]) + region.src_offset;
    char* dst = static_cast<char*>(const_cast<void*>(bases.ptr[region.dst_buffer])) + region.dst_offset;
    body(region, tile, src, dst);
  }
}

// Copies one tile with the widest unit that every address and length of it allows (block-uniform).
__device__ inline void copy_tile_widest(const DeviceCopyRegion& r, const DeviceCopyTile& t, const char* src,
                                        char* dst) {
  const unsigned long long a =
      r.align | reinterpret_cast<unsigned long long>(src) | reinterpret_cast<unsigned long long>(dst) |
      static_cast<unsigned long long>(t.col_begin) | static_cast<unsigned long long>(t.col_end);
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

template <class Bases>
__device__ inline void copy_tiles(const DeviceCopyRegion* regions, const DeviceCopyTile* tiles, int tile_count,
                                  const Bases& bases) {
  for_each_tile(regions, tiles, tile_count, bases,
                [](const DeviceCopyRegion& r, const DeviceCopyTile& t, const char* src, char* dst) {
                  copy_tile_widest(r, t, src, dst);
                });
}

// The tiles of a converting batch: regions marked `convert` converted, the others (packs, staging, a fused step's peer
// copies) copied as bytes by the same routine (vectors of 8 bytes where aligned), so that each of the many (dtype pair,
// kernel) instances holds one tile routine, not copy_tile_widest's five.
template <class From, class To, class Bases>
__device__ inline void convert_tiles(const DeviceCopyRegion* regions, const DeviceCopyTile* tiles, int tile_count,
                                     const Bases& bases) {
  for_each_tile(regions, tiles, tile_count, bases,
                [](const DeviceCopyRegion& r, const DeviceCopyTile& t, const char* src, char* dst) {
                  if (r.convert)
                    convert_tile<From, To>(r, t, src, dst);
                  else
                    convert_tile<unsigned char, unsigned char>(r, t, src, dst);
                });
}

}  // namespace reshard::cuda
