// reshard._core: layouts, the planner and the host backend. No CUDA, no NCCL, no framework.
#include <pybind11/pybind11.h>

#include "bindings.hpp"
#include "errors.hpp"

#ifndef RESHARD_VERSION
#define RESHARD_VERSION "unknown"
#endif

PYBIND11_MODULE(_core, m) {
  m.doc() = "reshard's C++ core: layouts, plans and the host backend (see the `reshard` package)";
  m.attr("__version__") = RESHARD_VERSION;
  reshard::python::register_error_translation(m);
  reshard::python::bind_layout(m);
  reshard::python::bind_plan(m);
  reshard::python::bind_host(m);
  reshard::python::bind_buffers(m);
  reshard::python::bind_conversion(m);
}
