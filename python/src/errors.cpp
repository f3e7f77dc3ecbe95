#include "errors.hpp"

#include "reshard/error.hpp"

namespace reshard::python {

void register_error_translation(pybind11::module_&) {
  pybind11::register_local_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      PyObject* type = PyExc_RuntimeError;
      if (e.kind() == ErrorKind::kInvalidArgument || e.kind() == ErrorKind::kParse) type = PyExc_ValueError;
      if (e.kind() == ErrorKind::kTimeout) type = PyExc_TimeoutError;
      PyErr_SetString(type, e.what());
    }
  });
}

}  // namespace reshard::python
