// fusionjit.Array in C++: a buffer with a shape, a dtype and JAX's weak-type flag, plus the
// mapping between fusionjit dtypes and NumPy's.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <optional>
#include <vector>

#include "ir/dtype.h"
#include "runtime/buffer.h"

namespace fj::py_bindings {

namespace py = pybind11;

struct PyArray {
  std::shared_ptr<Buffer> buffer;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  bool weak_type = false;

  int64_t size() const;
  int64_t nbytes() const { return size() * DTypeBytes(dtype); }
};

py::dtype NumpyDType(DType t);
// The dtype of `d`, whatever its byte order (see IsNativeByteOrder), or nullopt.
std::optional<DType> DTypeFromNumpy(const py::dtype& d);
// Builds DTypeFromNumpy's table now (the extension does at import; see module.cc).
void InitializeDTypeTable();
// Whether `d`'s elements are in the host's byte order (else they need a conversion).
bool IsNativeByteOrder(const py::dtype& d);
// The numpy type number of each dtype, for quick checks on the hot path.
int NumpyTypeNum(DType t);

// A read-only NumPy view of the array's buffer (no copy); keeps the buffer alive.
py::array NumpyView(const PyArray& a);
// Copies a C-contiguous NumPy array of a supported dtype into a new PyArray.
PyArray ArrayFromNumpy(const py::array& x, bool weak_type);
// A PyArray sharing `x`'s memory (and keeping `x` alive), when it is C-contiguous, of a
// supported dtype in native byte order and 64-byte aligned; else nothing (copy instead).
std::optional<PyArray> ArrayViewOfNumpy(const py::array& x, bool weak_type);

// The Python type object of fusionjit.Array (for exact-type checks on the hot path).
PyTypeObject* ArrayType();
py::object WrapArray(PyArray a);

void DefineArray(py::module_& m);

}  // namespace fj::py_bindings
