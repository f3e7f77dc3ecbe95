// How reshard::Error reaches Python: bad input (kInvalidArgument, kParse) is ValueError, a timeout is TimeoutError,
// anything else RuntimeError; the message is the library's (the CLI prints the same text after "error: ").
#pragma once

#include <pybind11/pybind11.h>

namespace reshard::python {

void register_error_translation(pybind11::module_& m);

}  // namespace reshard::python
