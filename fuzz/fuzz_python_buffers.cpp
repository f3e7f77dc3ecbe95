// Fuzzes the Python bindings' buffer description (python/src/buffers.cpp, shared by reshard._core and reshard._cuda)
// in an embedded interpreter: the input builds a __cuda_array_interface__ (its data, shape, strides and typestr of
// any length and type, as a careless or hostile producer would hand them) or a DLPack producer (a capsule whose
// DLTensor has any dims, strides, dtype and device), and buffer_from must describe it or refuse it with
// reshard::Error, never read past what it was given (ASan) or raise anything else.
#include <pybind11/embed.h>

#include <cstring>
#include <memory>
#include <vector>

#include "buffers.hpp"
#include "dlpack_header.hpp"
#include "fuzz_common.hpp"

namespace py = pybind11;

namespace {

using reshard::fuzz::Bytes;

// An integer from the input: small, around the int64 limits, or negative.
py::object integer(Bytes& in) {
  switch (in.next(0, 5)) {
    case 0:
      return py::int_(in.next(0, 64));
    case 1:
      return py::int_(-in.next(0, 64));
    case 2:
      return py::int_(static_cast<unsigned long long>(in.next(0, 255)) << in.next(0, 56));
    case 3:
      return py::reinterpret_steal<py::object>(PyLong_FromString("123456789012345678901234567890", nullptr, 10));
    case 4:
      return py::float_(in.next(0, 8) / 2.0);
    default:
      return py::bool_(in.next(0, 1) != 0);
  }
}

// A sequence of n values, as a tuple, a list or something else.
py::object sequence(Bytes& in, int n) {
  py::list items;
  for (int i = 0; i < n; ++i) items.append(integer(in));
  switch (in.next(0, 3)) {
    case 0:
      return py::tuple(items);
    case 1:
      return items;
    case 2:
      return py::str("abc");
    default:
      return py::none();
  }
}

py::object cuda_array_interface(Bytes& in) {
  py::dict d;
  if (in.next(0, 7)) d["data"] = py::make_tuple(integer(in), py::bool_(in.next(0, 1) != 0));
  if (in.next(0, 7)) d["shape"] = sequence(in, in.next(0, 70));
  if (in.next(0, 3)) d["strides"] = sequence(in, in.next(0, 70));
  static const char* const kTypestr[] = {"<f4", "<f8", "|u1", "<c8", "f4", "<f0", "<f99", "", "<i", ">i2", "<V3"};
  if (in.next(0, 7)) d["typestr"] = py::str(kTypestr[in.next(0, 10)]);
  if (in.next(0, 7) == 0) d["mask"] = py::int_(1);
  d["version"] = py::int_(3);
  py::object ns = py::module_::import("types").attr("SimpleNamespace")();
  ns.attr("__cuda_array_interface__") = in.next(0, 15) ? py::object(d) : py::object(py::list());
  return ns;
}

#if RESHARD_HAVE_DLPACK
// A DLPack producer whose capsule's tensor is built from the input; its arrays are as long as it says (a producer
// lies about what they hold, not about its own memory).
struct Producer {
  std::vector<std::int64_t> shape, strides;
  std::vector<std::byte> storage = std::vector<std::byte>(64);
  DLManagedTensor managed{};
};

py::object dlpack_producer(Bytes& in) {
  auto p = std::make_shared<Producer>();
  const int ndim = in.next(0, 70);
  for (int i = 0; i < ndim; ++i) p->shape.push_back(in.next(0, 3) ? in.next(0, 9) : -in.next(1, 9));
  DLTensor& t = p->managed.dl_tensor;
  t.data = p->storage.data();
  t.ndim = in.next(0, 15) ? ndim : -1;
  t.shape = ndim && in.next(0, 15) ? p->shape.data() : nullptr;
  if (in.next(0, 1)) {
    for (int i = 0; i < ndim; ++i) p->strides.push_back(in.next(0, 5) - 1);
    t.strides = ndim ? p->strides.data() : nullptr;
  }
  t.dtype.code = static_cast<std::uint8_t>(in.next(0, 5));
  t.dtype.bits = static_cast<std::uint8_t>(in.next(0, 255));
  t.dtype.lanes = static_cast<std::uint16_t>(in.next(0, 3));
  t.byte_offset = static_cast<std::uint64_t>(in.next(0, 64));
  const int device = in.next(0, 1) ? kDLCPU : in.next(0, 20);
  const std::int32_t type = device;  // written as a C producer writes it: any integer
  std::memcpy(&t.device.device_type, &type, sizeof(type));
  py::object ns = py::module_::import("types").attr("SimpleNamespace")();
  ns.attr("__dlpack_device__") = py::cpp_function([device] { return py::make_tuple(device, 0); });
  ns.attr("__dlpack__") = py::cpp_function([p](py::args, py::kwargs) {
    // Never consumed here: the capsule is freed with the tensor's description, the producer outlives it.
    return py::capsule(&p->managed, "dltensor");
  });
  return ns;
}
#endif

}  // namespace

// The interpreter is never finalized: what it holds at exit is not a leak of the code under test (whose own leaks
// libFuzzer finds input by input).
extern "C" const char* __lsan_default_suppressions() { return "leak:libpython\nleak:_PyObject_Malloc\nleak:PyMem_\n"; }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static py::scoped_interpreter* interpreter = new py::scoped_interpreter();  // one, kept for the process
  (void)interpreter;
  Bytes in(data, size);
  py::object obj;
#if RESHARD_HAVE_DLPACK
  obj = in.next(0, 1) ? cuda_array_interface(in) : dlpack_producer(in);
#else
  obj = cuda_array_interface(in);
#endif
  reshard::fuzz::only_reshard_errors([&] {
    const reshard::python::BufferRef b = reshard::python::buffer_from(obj, 0, "tensor");
    if (b.bytes && *b.bytes > 0 && b.element_bits <= 0) std::abort();
  });
  return 0;
}
