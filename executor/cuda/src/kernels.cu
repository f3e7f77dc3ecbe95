// Batched copy kernel (pack, unpack and local copies of a step in one launch) and the test-pattern kernels.
#include "kernels.hpp"
#include "reshard/detail/pattern_bits.hpp"

namespace reshard::cuda {
namespace {

constexpr int kThreads = 256;

// Copies one tile with `Unit`-sized accesses. Wide rows: the block walks the rows and its threads stride along
// each row, four independent loads in flight per thread. Narrow rows: threads take (row, unit) pairs.
template <class Unit>
__device__ void copy_tile(const DeviceCopyRegion& r, const DeviceCopyTile& t, const char* src, char* dst) {
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
    const long long total = (t.row_end - t.row_begin) * units_per_row;
    for (long long u = threadIdx.x; u < total; u += kThreads) {
      long long row = t.row_begin + u / units_per_row, col = u % units_per_row;
      long long so, dof;
      row_offsets(row, so, dof);
      reinterpret_cast<Unit*>(dst + dof + t.col_begin)[col] =
          reinterpret_cast<const Unit*>(src + so + t.col_begin)[col];
    }
  }
}

// Each block walks tiles grid-stride, so the grid can stay small enough to leave SMs to concurrent NCCL kernels.
__global__ void __launch_bounds__(kThreads)
    batched_copy(const DeviceCopyRegion* regions, const DeviceCopyTile* tiles, int tile_count, DeviceBases bases) {
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

__device__ long long global_index(const PatternBox& b, long long local) {
  long long g = 0;
  for (int d = b.ndim - 1; d >= 0; --d) {
    long long idx = local % b.shape[d];
    local /= b.shape[d];
    g += (idx + b.offset[d]) * b.global_stride[d];
  }
  return g;
}

__device__ unsigned long long load_bits(const void* data, long long i, int es) {
  switch (es) {
    case 8:
      return static_cast<const unsigned long long*>(data)[i];
    case 4:
      return static_cast<const unsigned int*>(data)[i];
    case 2:
      return static_cast<const unsigned short*>(data)[i];
    default:
      return static_cast<const unsigned char*>(data)[i];
  }
}

__global__ void fill_pattern(void* data, PatternBox box, int code, int es) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < box.elements;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    unsigned long long bits = detail::pattern_bits(global_index(box, i), code);
    switch (es) {
      case 8:
        static_cast<unsigned long long*>(data)[i] = bits;
        break;
      case 4:
        static_cast<unsigned int*>(data)[i] = static_cast<unsigned int>(bits);
        break;
      case 2:
        static_cast<unsigned short*>(data)[i] = static_cast<unsigned short>(bits);
        break;
      default:
        static_cast<unsigned char*>(data)[i] = static_cast<unsigned char>(bits);
    }
  }
}

__global__ void count_mismatches(const void* data, PatternBox box, int code, int es, unsigned long long* counter) {
  __shared__ unsigned long long block_count;
  if (threadIdx.x == 0) block_count = 0;
  __syncthreads();
  unsigned long long mine = 0;
  const unsigned long long mask = es == 8 ? ~0ull : (1ull << (8 * es)) - 1;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < box.elements;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    unsigned long long want = detail::pattern_bits(global_index(box, i), code) & mask;
    mine += load_bits(data, i, es) != want;
  }
  if (mine) atomicAdd(&block_count, mine);
  __syncthreads();
  if (threadIdx.x == 0 && block_count) atomicAdd(counter, block_count);
}

int grid_for(long long elements) {
  long long blocks = (elements + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 1 ? 1 : (blocks > 65536 ? 65536 : blocks));
}

}  // namespace

cudaError_t launch_copies(const DeviceCopyRegion* regions, const DeviceCopyTile* tiles, int tile_count, int max_blocks,
                          DeviceBases bases, cudaStream_t stream) {
  if (tile_count == 0) return cudaSuccess;
  int blocks = max_blocks > 0 && tile_count > max_blocks ? max_blocks : tile_count;
  batched_copy<<<blocks, kThreads, 0, stream>>>(regions, tiles, tile_count, bases);
  return cudaGetLastError();
}

cudaError_t launch_fill_pattern(void* data, PatternBox box, int code, int es, cudaStream_t stream) {
  if (box.elements == 0) return cudaSuccess;
  fill_pattern<<<grid_for(box.elements), kThreads, 0, stream>>>(data, box, code, es);
  return cudaGetLastError();
}

cudaError_t launch_count_mismatches(const void* data, PatternBox box, int code, int es, unsigned long long* counter,
                                    cudaStream_t stream) {
  if (box.elements == 0) return cudaSuccess;
  count_mismatches<<<grid_for(box.elements), kThreads, 0, stream>>>(data, box, code, es, counter);
  return cudaGetLastError();
}

}  // namespace reshard::cuda
