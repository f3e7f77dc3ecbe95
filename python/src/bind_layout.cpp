// Layouts: what `reshard layout --json` prints, and placement normalisation for the Python layer.
#include <pybind11/stl.h>

#include "args.hpp"
#include "bindings.hpp"
#include "buffers.hpp"
#include "reshard/layout_format.hpp"

namespace py = pybind11;

namespace reshard::python {

void bind_layout(py::module_& m) {
  m.def(
      "layout_json",
      [](const std::string& mesh, std::optional<std::vector<int>> ranks, const std::string& placements,
         const ShapeArg& shape) {
        return layout_json(make_layout({mesh, std::move(ranks), placements, shape}));
      },
      py::arg("mesh"), py::arg("ranks"), py::arg("placements"), py::arg("shape"),
      "The text `reshard layout --json` prints (without its final newline).");
  m.def(
      "normalize_placements",
      [](const std::string& placements, int tensor_ndim) {
        std::vector<std::string> out;
        for (const Placement& p : parse_placements(placements)) out.push_back(to_string(normalize(p, tensor_ndim)));
        return out;
      },
      py::arg("placements"), py::arg("tensor_ndim"),
      "Parses placements and resolves negative shard dims: 'S-1,P' -> ['S1', 'P'] for a 2-D tensor.");
  m.def(
      "dtype_size", [](const std::string& dtype) { return element_size(parse_dtype(dtype)); }, py::arg("dtype"),
      "Bytes per element of a dtype given by its CLI name (bf16, f32, ...).");
}

void bind_buffers(py::module_& m) {
  m.attr("HAVE_DLPACK") = dlpack_supported();
  m.def(
      "describe_buffer",
      [](py::handle obj, std::uintptr_t stream) {
        BufferRef b = buffer_from(obj, stream, "tensor");
        py::dict d;
        d["data"] = reinterpret_cast<std::uintptr_t>(b.data);
        d["bytes"] = b.bytes ? py::cast(*b.bytes) : py::none();
        d["memory"] = b.memory == MemoryKind::kHost ? "host" : b.memory == MemoryKind::kCuda ? "cuda" : "unknown";
        d["device"] = b.device;
        d["element_bits"] = b.element_bits;
        d["readonly"] = b.readonly;
        return d;
      },
      py::arg("tensor"), py::arg("stream") = 0,
      "What the executor bindings read from a tensor: address, bytes, memory, device, element size.");
}

}  // namespace reshard::python
