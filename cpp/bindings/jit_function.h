// The cached-call fast path of fusionjit.jit, in C++ (DESIGN.md, "Where the time goes"):
// flatten the arguments, build the signature, find the executable, pass buffer pointers,
// run, wrap the outputs. A cache miss calls back into Python to trace and compile.
#pragma once

#include <pybind11/pybind11.h>

namespace fj::py_bindings {

void DefineJitFunction(pybind11::module_& m);

}  // namespace fj::py_bindings
