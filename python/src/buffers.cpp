#include "buffers.hpp"

#include <pybind11/stl.h>
#ifndef RESHARD_HAVE_DLPACK
#define RESHARD_HAVE_DLPACK 0
#endif
#if RESHARD_HAVE_DLPACK
#include <dlpack/dlpack.h>
#endif

#include <vector>

#include "reshard/checked_math.hpp"
#include "reshard/error.hpp"

namespace py = pybind11;

namespace reshard::python {
namespace {

constexpr size_t kMaxDims = 64;  // more dims than any tensor library makes: a description claiming more is refused

// Bytes of a dense row-major tensor; kInvalidArgument when strides are given and are not row-major (a dim of
// extent 1 may have any stride, as in NumPy and PyTorch).
size_t dense_bytes(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>* strides_elems,
                   int element_bits, const char* what) {
  RESHARD_REQUIRE(element_bits > 0 && element_bits % 8 == 0, what, ": element size of ", element_bits,
                  " bits is not a whole number of bytes");
  RESHARD_REQUIRE(shape.size() <= kMaxDims, what, ": ", shape.size(), " dims; at most ", kMaxDims);
  RESHARD_REQUIRE(!strides_elems || strides_elems->size() == shape.size(), what, ": ", strides_elems->size(),
                  " strides for ", shape.size(), " dims");
  Index count = 1;
  for (std::int64_t s : shape) {
    RESHARD_REQUIRE(s >= 0, what, ": negative extent ", s);
    count = checked_mul(count, static_cast<Index>(s), what);
  }
  if (strides_elems && count > 0) {
    Index expected = 1;
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      RESHARD_REQUIRE(shape[d] == 1 || (*strides_elems)[d] == expected, what,
                      ": tensor is not dense row-major (C-contiguous); make it contiguous first");
      expected = checked_mul(expected, static_cast<Index>(shape[d]), what);
    }
  }
  return static_cast<size_t>(checked_mul(count, static_cast<Index>(element_bits / 8), what));
}

#if RESHARD_HAVE_DLPACK
BufferRef from_dlpack(py::handle obj, std::uintptr_t stream, const char* what) {
  BufferRef buf;
  py::tuple dev = obj.attr("__dlpack_device__")();
  const int device_type = dev[0].cast<int>();
  py::object capsule;
  if (device_type == kDLCUDA || device_type == kDLCUDAManaged) {
    // DLPack: 1 is the legacy default stream (0 is ambiguous and disallowed).
    capsule = obj.attr("__dlpack__")(py::arg("stream") = stream == 0 ? std::uintptr_t{1} : stream);
  } else {
    capsule = obj.attr("__dlpack__")();
  }
  RESHARD_REQUIRE(PyCapsule_IsValid(capsule.ptr(), "dltensor"), what,
                  ": __dlpack__ did not return an unused 'dltensor' capsule");
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  if (!managed) throw py::error_already_set();
  const DLTensor& t = managed->dl_tensor;
  RESHARD_REQUIRE(t.ndim >= 0 && static_cast<size_t>(t.ndim) <= kMaxDims && (t.ndim == 0 || t.shape != nullptr), what,
                  ": DLPack tensor with ", t.ndim, " dims", t.ndim > 0 && !t.shape ? " and no shape" : "");
  std::vector<std::int64_t> shape(t.shape, t.shape + t.ndim);
  std::vector<std::int64_t> strides;
  if (t.strides) strides.assign(t.strides, t.strides + t.ndim);
  buf.element_bits = t.dtype.bits * t.dtype.lanes;
  buf.bytes = dense_bytes(shape, t.strides ? &strides : nullptr, buf.element_bits, what);
  buf.data = static_cast<char*>(t.data) + t.byte_offset;
  if (t.device.device_type == kDLCPU || t.device.device_type == kDLCUDAHost) {
    buf.memory = MemoryKind::kHost;
  } else if (t.device.device_type == kDLCUDA || t.device.device_type == kDLCUDAManaged) {
    buf.memory = MemoryKind::kCuda;
    buf.device = t.device.device_id;
  }
  // Not consumed (the capsule keeps its name): when it is released, the producer's destructor calls the deleter.
  buf.keepalive = std::move(capsule);
  return buf;
}
#else
BufferRef from_dlpack(py::handle, std::uintptr_t, const char* what) {
  fail(ErrorKind::kInvalidArgument, cat(what, ": this reshard was built without DLPack (dlpack/dlpack.h); pass ",
                                        "__cuda_array_interface__ or a data address"));
}
#endif

int typestr_bits(const std::string& typestr, const char* what) {
  RESHARD_REQUIRE(typestr.size() >= 3, what, ": __cuda_array_interface__ typestr '", typestr, "' is malformed");
  int bytes = 0;
  try {
    bytes = std::stoi(typestr.substr(2));
  } catch (...) {
    bytes = 0;
  }
  RESHARD_REQUIRE(bytes > 0, what, ": __cuda_array_interface__ typestr '", typestr, "' is malformed");
  return bytes * 8;
}

BufferRef from_cuda_array_interface(py::handle obj, const char* what) {
  BufferRef buf;
  py::dict cai = obj.attr("__cuda_array_interface__");
  py::tuple data = cai["data"];
  buf.data = reinterpret_cast<void*>(data[0].cast<std::uintptr_t>());
  buf.readonly = data[1].cast<bool>();
  auto shape = cai["shape"].cast<std::vector<std::int64_t>>();
  buf.element_bits = typestr_bits(cai["typestr"].cast<std::string>(), what);
  std::vector<std::int64_t> strides;
  bool has_strides = cai.contains("strides") && !cai["strides"].is_none();
  if (has_strides) {
    // Byte strides: convert to elements (a byte stride that is not a multiple cannot be dense).
    const std::int64_t item = buf.element_bits / 8;
    for (std::int64_t s : cai["strides"].cast<std::vector<std::int64_t>>()) strides.push_back(s % item ? -1 : s / item);
  }
  buf.bytes = dense_bytes(shape, has_strides ? &strides : nullptr, buf.element_bits, what);
  buf.memory = MemoryKind::kCuda;
  buf.device = -1;  // the interface does not say; the caller's device is assumed
  buf.keepalive = py::reinterpret_borrow<py::object>(obj);
  return buf;
}

}  // namespace

bool dlpack_supported() { return RESHARD_HAVE_DLPACK != 0; }

BufferRef buffer_from(py::handle obj, std::uintptr_t stream, const char* what) {
  if (py::isinstance<py::int_>(obj) && !py::isinstance<py::bool_>(obj)) {
    BufferRef buf;
    buf.data = reinterpret_cast<void*>(obj.cast<std::uintptr_t>());
    return buf;
  }
  if (py::hasattr(obj, "__cuda_array_interface__")) return from_cuda_array_interface(obj, what);
  if (py::hasattr(obj, "__dlpack__") && py::hasattr(obj, "__dlpack_device__")) return from_dlpack(obj, stream, what);
  fail(ErrorKind::kInvalidArgument,
       cat(what, ": expected a tensor (DLPack or __cuda_array_interface__) or a data address, got ",
           std::string(py::str(py::type::of(obj).attr("__name__")))));
}

void check_buffer_size(const BufferRef& buf, size_t bytes, MemoryKind memory, const char* what) {
  if (!buf.bytes) return;  // a raw address: the caller vouches for it
  RESHARD_REQUIRE(buf.memory == memory || buf.memory == MemoryKind::kUnknown, what, ": tensor is in ",
                  buf.memory == MemoryKind::kHost ? "host" : "CUDA", " memory; this executor needs ",
                  memory == MemoryKind::kHost ? "host" : "CUDA", " memory");
  RESHARD_REQUIRE(*buf.bytes == bytes, what, ": tensor has ", *buf.bytes, " bytes; this rank's local tensor has ",
                  bytes);
}

}  // namespace reshard::python
