#include "buffers.hpp"

#include <pybind11/stl.h>

#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

#include "dlpack_header.hpp"
#include "reshard/checked_math.hpp"
#include "reshard/error.hpp"
#include "reshard/text.hpp"

namespace py = pybind11;

namespace reshard::python {
namespace {

// Dims a tensor from Python may have (PyTorch allows 64, NumPy 64).
constexpr size_t kMaxBufferDims = 64;

// Bytes of a dense row-major tensor; kInvalidArgument when strides are given and are not row-major (a dim of
// extent 1 may have any stride, as in NumPy and PyTorch).
size_t dense_bytes(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>* strides_elems,
                   int element_bits, const char* what) {
  RESHARD_REQUIRE(element_bits > 0 && element_bits % 8 == 0, what, ": element size of ", element_bits,
                  " bits is not a whole number of bytes");
  RESHARD_REQUIRE(shape.size() <= kMaxBufferDims, what, ": ", shape.size(), " dims; at most ", kMaxBufferDims);
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
  py::object dev = obj.attr("__dlpack_device__")();
  RESHARD_REQUIRE(py::isinstance<py::tuple>(dev) && py::len(dev) == 2 && py::isinstance<py::int_>(dev[py::int_(0)]),
                  what, ": __dlpack_device__ must return (device type, device id)");
  const int device_type = dev[py::int_(0)].cast<int>();
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
  RESHARD_REQUIRE(t.ndim >= 0 && static_cast<size_t>(t.ndim) <= kMaxBufferDims && (t.ndim == 0 || t.shape), what,
                  ": DLPack tensor with ", t.ndim, " dims", t.ndim > 0 && !t.shape ? " and no shape" : "", " (at most ",
                  kMaxBufferDims, ")");
  std::vector<std::int64_t> shape(t.shape, t.shape + t.ndim);
  std::vector<std::int64_t> strides;
  if (t.strides) strides.assign(t.strides, t.strides + t.ndim);
  buf.element_bits = t.dtype.bits * t.dtype.lanes;
  buf.bytes = dense_bytes(shape, t.strides ? &strides : nullptr, buf.element_bits, what);
  buf.data = static_cast<char*>(t.data) + t.byte_offset;
  // The device type as the producer wrote it: an integer that need not be one of this header's enumerators.
  std::int32_t type = 0;
  static_assert(sizeof(t.device.device_type) == sizeof(type));
  std::memcpy(&type, &t.device.device_type, sizeof(type));
  if (type == kDLCPU || type == kDLCUDAHost) {
    buf.memory = MemoryKind::kHost;
  } else if (type == kDLCUDA || type == kDLCUDAManaged) {
    buf.memory = MemoryKind::kCuda;
    buf.device = t.device.device_id;
  } else {
    fail(ErrorKind::kInvalidArgument, cat(what, ": DLPack device type ", type,
                                          " is neither host memory nor CUDA (CPU, CUDA host, CUDA, CUDA managed)"));
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

// The element size of a __cuda_array_interface__ typestr: byte order ('<', '>', '|', '='), kind, then bytes ("<f4").
int typestr_bits(py::handle typestr, const char* what) {
  RESHARD_REQUIRE(py::isinstance<py::str>(typestr), what, ": __cuda_array_interface__ typestr must be a string");
  const std::string text = typestr.cast<std::string>();
  std::optional<long long> bytes = text.size() >= 3 && std::string_view("<>|=").find(text[0]) != std::string_view::npos
                                       ? parse_integer(std::string_view(text).substr(2))
                                       : std::nullopt;
  RESHARD_REQUIRE(bytes && *bytes > 0 && *bytes <= 64, what, ": __cuda_array_interface__ typestr '", printable(text),
                  "' is malformed");
  return static_cast<int>(*bytes) * 8;
}

// A sequence of integers from the interface (shape, strides), each fitting int64; `field` names it in errors.
std::vector<std::int64_t> cai_integers(py::handle v, const char* field, const char* what) {
  RESHARD_REQUIRE(py::isinstance<py::tuple>(v) || py::isinstance<py::list>(v), what, ": __cuda_array_interface__ ",
                  field, " must be a tuple of integers");
  py::sequence seq = py::reinterpret_borrow<py::sequence>(v);
  RESHARD_REQUIRE(seq.size() <= kMaxBufferDims, what, ": __cuda_array_interface__ ", field, " has ", seq.size(),
                  " entries; at most ", kMaxBufferDims);
  std::vector<std::int64_t> out;
  for (py::handle x : seq) {
    RESHARD_REQUIRE(py::isinstance<py::int_>(x) && !py::isinstance<py::bool_>(x), what, ": __cuda_array_interface__ ",
                    field, " must be a tuple of integers");
    try {
      out.push_back(x.cast<std::int64_t>());
    } catch (const py::cast_error&) {
      fail(ErrorKind::kInvalidArgument, cat(what, ": __cuda_array_interface__ ", field, " entry out of range"));
    }
  }
  return out;
}

BufferRef from_cuda_array_interface(py::handle obj, const char* what) {
  BufferRef buf;
  py::object iface = obj.attr("__cuda_array_interface__");
  RESHARD_REQUIRE(py::isinstance<py::dict>(iface), what, ": __cuda_array_interface__ must be a dict");
  py::dict cai = py::reinterpret_borrow<py::dict>(iface);
  for (const char* key : {"data", "shape", "typestr"})
    RESHARD_REQUIRE(cai.contains(key), what, ": __cuda_array_interface__ lacks '", key, "'");
  RESHARD_REQUIRE(!cai.contains("mask") || cai["mask"].is_none(), what,
                  ": __cuda_array_interface__ with a mask (a masked array) is not supported");
  py::object data = cai["data"];
  RESHARD_REQUIRE(py::isinstance<py::tuple>(data) && py::len(data) == 2 &&
                      py::isinstance<py::int_>(data[py::int_(0)]) && py::isinstance<py::bool_>(data[py::int_(1)]),
                  what, ": __cuda_array_interface__ data must be (address, read-only flag)");
  try {
    buf.data = reinterpret_cast<void*>(data[py::int_(0)].cast<std::uintptr_t>());
  } catch (const py::cast_error&) {
    fail(ErrorKind::kInvalidArgument, cat(what, ": __cuda_array_interface__ data address out of range"));
  }
  buf.readonly = data[py::int_(1)].cast<bool>();
  const std::vector<std::int64_t> shape = cai_integers(cai["shape"], "shape", what);
  buf.element_bits = typestr_bits(cai["typestr"], what);
  std::vector<std::int64_t> strides;
  const bool has_strides = cai.contains("strides") && !cai["strides"].is_none();
  if (has_strides) {
    // Byte strides: convert to elements (a byte stride that is not a multiple cannot be dense).
    const std::int64_t item = buf.element_bits / 8;
    for (std::int64_t s : cai_integers(cai["strides"], "strides", what)) strides.push_back(s % item ? -1 : s / item);
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
    try {
      buf.data = reinterpret_cast<void*>(obj.cast<std::uintptr_t>());
    } catch (const py::cast_error&) {
      fail(ErrorKind::kInvalidArgument, cat(what, ": a data address must be an integer in 0..2^64-1"));
    }
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
