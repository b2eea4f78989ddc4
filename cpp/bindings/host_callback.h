// Host callbacks from Python (runtime/host_callback.h): registered by ModuleBuilder's
// host_callback, and the Python exception a callback raised, re-raised when its program's
// run fails.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/host_callback.h"

namespace fj::py_bindings {

using Specs = std::vector<std::pair<std::string, std::vector<int64_t>>>;

// Registers `fn` for programs that call it by `*id`: called with a list of NumPy arrays (the
// operands, of `operands`' dtypes and shapes), it returns a list of the results (NumPy
// arrays of `results`'); its exception fails the run and is re-raised.
std::shared_ptr<const HostCallback> RegisterPythonCallback(pybind11::object fn, const Specs& operands,
                                                           const Specs& results, int64_t* id);

// Restores, as the pending Python error, the exception the first failing callback of the
// last run on this thread raised: true if there was one (the run's fj::Error then only
// reports it).
bool RestoreHostCallbackError();

}  // namespace fj::py_bindings
