// Bindings for the IR, the compiler and executables.
#pragma once

#include <pybind11/pybind11.h>

namespace fj::py_bindings {

void DefineIr(pybind11::module_& m);

}  // namespace fj::py_bindings
