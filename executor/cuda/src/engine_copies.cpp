// Copies on the copy engines (no SMs): each region is one 1-D, 2-D or 3-D memcpy between strided row-major views.
#include "copy_batches.hpp"
#include "reshard/cuda_check.hpp"

namespace reshard::cuda {
namespace {

// One region as a memcpy: `rows` rows of `row_bytes` per plane, `planes` planes; pitches in bytes.
struct EngineCopy {
  BufferRef src, dst;
  size_t row_bytes = 0, rows = 1, planes = 1;
  size_t src_pitch = 0, dst_pitch = 0;    // bytes between rows
  size_t src_height = 0, dst_height = 0;  // rows between planes (3-D)
};

class EngineCopyBatch : public CopyBatch {
 public:
  EngineCopyBatch(const std::vector<CopyRegion>& regions, int es) : es_(es) {
    for (const CopyRegion& r : regions) {
      const int nd = r.shape.size();
      RESHARD_REQUIRE(nd >= 1 && nd <= 3, "a copy-engine region has ", nd, " dims; at most 3");
      if (r.shape.product() == 0) continue;
      EngineCopy c{r.src, r.dst};
      c.row_bytes = static_cast<size_t>(r.shape[nd - 1]) * es;
      if (nd >= 2) {
        c.rows = static_cast<size_t>(r.shape[nd - 2]);
        c.src_pitch = static_cast<size_t>(r.src_strides[nd - 2]) * es;
        c.dst_pitch = static_cast<size_t>(r.dst_strides[nd - 2]) * es;
      }
      if (nd == 3) {
        c.planes = static_cast<size_t>(r.shape[0]);
        // Row-major views: a plane stride is a whole number of rows.
        RESHARD_REQUIRE(r.src_strides[0] % r.src_strides[1] == 0 && r.dst_strides[0] % r.dst_strides[1] == 0,
                        "internal: a 3-D copy-engine region whose plane stride is not a whole number of rows");
        c.src_height = static_cast<size_t>(r.src_strides[0] / r.src_strides[1]);
        c.dst_height = static_cast<size_t>(r.dst_strides[0] / r.dst_strides[1]);
      }
      copies_.push_back(c);
    }
  }

  void run(const BufferBases& b, StreamHandle stream) override {
    auto s = static_cast<cudaStream_t>(stream);
    for (const EngineCopy& c : copies_) {
      const void* src = address_of(b, c.src, es_);
      void* dst = const_cast<void*>(address_of(b, c.dst, es_));
      if (c.planes == 1 && c.rows == 1) {
        RESHARD_CUDA_CHECK(cudaMemcpyAsync(dst, src, c.row_bytes, cudaMemcpyDefault, s));
      } else if (c.planes == 1) {
        RESHARD_CUDA_CHECK(
            cudaMemcpy2DAsync(dst, c.dst_pitch, src, c.src_pitch, c.row_bytes, c.rows, cudaMemcpyDefault, s));
      } else {
        cudaMemcpy3DParms p{};
        p.srcPtr = make_cudaPitchedPtr(const_cast<void*>(src), c.src_pitch, c.row_bytes, c.src_height);
        p.dstPtr = make_cudaPitchedPtr(dst, c.dst_pitch, c.row_bytes, c.dst_height);
        p.extent = make_cudaExtent(c.row_bytes, c.rows, c.planes);
        p.kind = cudaMemcpyDefault;
        RESHARD_CUDA_CHECK(cudaMemcpy3DAsync(&p, s));
      }
    }
  }

 private:
  int es_;
  std::vector<EngineCopy> copies_;
};

}  // namespace

std::unique_ptr<CopyBatch> make_engine_copies(const std::vector<CopyRegion>& regions, int element_size) {
  return std::make_unique<EngineCopyBatch>(regions, element_size);
}

}  // namespace reshard::cuda
