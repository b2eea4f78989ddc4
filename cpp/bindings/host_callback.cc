// Host callbacks from Python (see host_callback.h).
#include "bindings/host_callback.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings/array.h"
#include "ir/shape.h"
#include "runtime/host_callback.h"
#include "support/error.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace fj::py_bindings {
namespace {

// The exception the first failing callback of this thread's current run raised.
thread_local std::optional<py::error_already_set> pending_error;

// A Python function held from C++, which may let it go without the GIL (an executable
// freed by the code cache while a compilation runs without it).
struct PyFunction {
  py::object fn;
  explicit PyFunction(py::object f) : fn(std::move(f)) {}
  PyFunction(const PyFunction&) = delete;
  PyFunction& operator=(const PyFunction&) = delete;
  ~PyFunction() {
    if (!Py_IsInitialized()) {
      fn.release();  // the interpreter is gone, and the object with it
      return;
    }
    py::gil_scoped_acquire gil;
    fn = py::object();
  }
};

using Specs = std::vector<std::pair<std::string, std::vector<int64_t>>>;

std::vector<Shape> ParseSpecs(const Specs& specs) {
  std::vector<Shape> shapes;
  for (const auto& [name, dims] : specs) {
    std::optional<DType> dtype = ParseDType(name);
    if (!dtype) throw py::value_error("unknown dtype '" + name + "'");
    shapes.emplace_back(*dtype, dims);
  }
  return shapes;
}

// Calls `fn` with copies of the operands as NumPy arrays; it returns the results as
// C-contiguous NumPy arrays of the results' shapes and dtypes (the Python side checks and
// converts them), which are copied into the result buffers.
void CallPython(const PyFunction& fn, const std::vector<Shape>& operands, const std::vector<Shape>& results,
                void* const* operand_data, void* const* result_data) {
  py::gil_scoped_acquire gil;
  try {
    py::list args;
    for (size_t k = 0; k < operands.size(); ++k) {
      const Shape& s = operands[k];
      py::array a(NumpyDType(s.dtype()), s.dims());
      std::memcpy(a.mutable_data(), operand_data[k], static_cast<size_t>(s.ByteSize()));
      args.append(a);
    }
    py::object out = fn.fn(args);
    if (results.empty()) return;
    py::list values = out;
    if (values.size() != results.size()) ThrowInternal("the callback returned ", values.size(), " results, not ", results.size());
    for (size_t k = 0; k < results.size(); ++k) {
      py::array a = values[k];
      if (static_cast<int64_t>(a.nbytes()) != results[k].ByteSize() || !(a.flags() & py::array::c_style)) {
        ThrowInternal("the callback's result ", k, " is not ", results[k].ToString());
      }
      std::memcpy(result_data[k], a.data(), static_cast<size_t>(a.nbytes()));
    }
  } catch (py::error_already_set& e) {
    if (!pending_error) pending_error.emplace(std::move(e));
    throw Error(ErrorCode::kInvalidArgument, "a host callback raised an exception");
  }
}

}  // namespace

bool RestoreHostCallbackError() {
  if (!pending_error) return false;
  py::error_already_set e = std::move(*pending_error);
  pending_error.reset();
  e.restore();
  return true;
}

std::shared_ptr<const HostCallback> RegisterPythonCallback(py::object fn, const Specs& operands, const Specs& results,
                                                           int64_t* id) {
  auto held = std::make_shared<PyFunction>(std::move(fn));
  HostCallback callback;
  callback.num_operands = static_cast<int>(operands.size());
  callback.num_results = static_cast<int>(results.size());
  callback.fn = [held, in = ParseSpecs(operands), out = ParseSpecs(results)](void* const* operand_data,
                                                                            void* const* result_data) {
    CallPython(*held, in, out, operand_data, result_data);
  };
  return RegisterHostCallback(std::move(callback), id);
}

}  // namespace fj::py_bindings
