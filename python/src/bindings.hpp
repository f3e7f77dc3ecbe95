// The parts of reshard._core, each registered by its own file.
#pragma once

#include <pybind11/pybind11.h>

namespace reshard::python {

void bind_layout(pybind11::module_& m);   // layout_json, normalize_placements, local shapes
void bind_plan(pybind11::module_& m);     // Plan, make_plan
void bind_host(pybind11::module_& m);     // run_host
void bind_buffers(pybind11::module_& m);  // describe_buffer (what the CUDA path reads from a tensor)

}  // namespace reshard::python
