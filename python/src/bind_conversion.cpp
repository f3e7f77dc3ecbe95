// dtype conversion on the host for the Python layer: converting and block-quantizing NumPy arrays (the host path of
// the routes in reshard/_sync_request.py), and whether a layout carries block scales (reshard/block_scale.hpp).
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "args.hpp"
#include "bindings.hpp"
#include "reshard/block_scale.hpp"
#include "reshard/dtype_convert.hpp"

namespace py = pybind11;

namespace reshard::python {
namespace {

// `in` checked as an array the C++ side may read as `from` elements: of a kind holding `from`'s values (bf16 and fp8
// as their bits) and its element size, native byte order, aligned, C-contiguous.
void check_array(const py::array& in, DType from, const char* what) {
  RESHARD_REQUIRE(numpy_holds(in.dtype().kind(), from) && in.itemsize() == element_size(from), what, ": a ",
                  to_string(from), " array must hold ", element_size(from), "-byte elements of its kind, got ",
                  std::string(py::str(in.dtype())));
  RESHARD_REQUIRE(in.dtype().attr("isnative").cast<bool>(), what, ": the array is in non-native byte order (dtype ",
                  std::string(py::str(in.dtype())), ")");
  RESHARD_REQUIRE(in.attr("flags").attr("aligned").cast<bool>(), what,
                  ": the array is not aligned to its element size; pass a copy");
  RESHARD_REQUIRE(in.flags() & py::array::c_style, what, " takes a C-contiguous array");
}

py::array convert_array(const py::array& in, const std::string& from_name, const std::string& to_name) {
  const DType from = parse_dtype(from_name), to = parse_dtype(to_name);
  require_convertible(from, to);
  check_array(in, from, "convert_array");
  std::vector<py::ssize_t> shape(in.shape(), in.shape() + in.ndim());
  py::array out(numpy_dtype(to), shape);
  const void* src = in.data();
  void* dst = out.mutable_data();
  const auto n = static_cast<std::int64_t>(in.size());
  py::gil_scoped_release release;
  convert_elements(src, from, dst, to, n);
  return out;
}

// (codes, scale_inv) of a 2-D array of `from`: fp8 codes as uint8.
py::tuple quantize_array(const py::array& in, const std::string& from_name, const std::string& to_name, Index block) {
  const DType from = parse_dtype(from_name), to = parse_dtype(to_name);
  require_block_scaling(from, to, block);
  RESHARD_REQUIRE(in.ndim() == 2, "quantize_blocks takes a 2-D array, got ", in.ndim(), " dims");
  check_array(in, from, "quantize_blocks");
  const Index rows = in.shape(0), cols = in.shape(1);
  const Dims grid = scale_grid_shape(Dims{rows, cols}, block);
  py::array_t<std::uint8_t> codes({rows, cols});
  py::array_t<float> scales({grid[0], grid[1]});
  const void* src = in.data();
  void* dst = codes.mutable_data();
  float* s = scales.mutable_data();
  {
    py::gil_scoped_release release;
    quantize_blocks(src, from, rows, cols, dst, to, s, block);
  }
  return py::make_tuple(codes, scales);
}

}  // namespace

void bind_conversion(py::module_& m) {
  m.def("convert_array", &convert_array, py::arg("array"), py::arg("from_dtype"), py::arg("to_dtype"),
        "A C-contiguous array of `from_dtype` converted to `to_dtype` as the move converts (bf16 and fp8 as bits).");
  m.def("quantize_blocks", &quantize_array, py::arg("array"), py::arg("from_dtype"), py::arg("to_dtype"),
        py::arg("block"), "Block-scaled fp8 of a 2-D array: (fp8 codes as uint8, float32 scale_inv per block).");
  m.def(
      "block_misalignment",
      [](const std::string& mesh, std::optional<std::vector<int>> ranks, const std::string& placements,
         const ShapeArg& shape, Index block) {
        return block_misalignment(make_layout({mesh, std::move(ranks), placements, shape}), block);
      },
      py::arg("mesh"), py::arg("ranks"), py::arg("placements"), py::arg("shape"), py::arg("block"),
      "'' when the 2-D layout carries block scales (every rank holds whole blocks); else the first reason it does "
      "not.");
}

}  // namespace reshard::python
