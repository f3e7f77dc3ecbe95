// The parts of reshard._core, each registered by its own file.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "reshard/dtype.hpp"

namespace reshard::python {

void bind_layout(pybind11::module_& m);      // layout_json, normalize_placements, local shapes
void bind_plan(pybind11::module_& m);        // Plan, make_plan
void bind_host(pybind11::module_& m);        // run_host
void bind_buffers(pybind11::module_& m);     // describe_buffer (what the CUDA path reads from a tensor)
void bind_conversion(pybind11::module_& m);  // convert_array, quantize_blocks, block_misalignment (host)

// The NumPy dtype of a converted target's arrays: floats as floats, bf16 and fp8 as their bits (unsigned integers).
pybind11::dtype numpy_dtype(DType d);
// Whether NumPy arrays of kind `kind` ('f', 'u', ...) hold dtype d's values (bind_host.cpp states the rule).
bool numpy_holds(char kind, DType d);

}  // namespace reshard::python
