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
#include "runtime/executable.h"

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

// The array's buffer. Throws RuntimeError, as JAX does, when the array was deleted
// (Array.delete) or donated to a program that took its buffer over.
const std::shared_ptr<Buffer>& LiveBuffer(const PyArray& a);
// Takes `a`'s buffer for a program to change in place (a donation) and leaves `a` deleted,
// when nothing else can see the buffer: host memory of its own that no other Array, NumPy
// view or DLPack export holds; `held` is the call's own hold on it (taken when the call
// read its arguments, so that another thread deleting or donating the array meanwhile
// cannot free or change what the call reads). Else null, and `a` stays as it is.
std::shared_ptr<Buffer> TakeDonatedBuffer(PyArray& a, const std::shared_ptr<Buffer>& held);

// The donations of a run: each output that may take over a donated parameter's buffer
// (Executable::output_aliases) gets the argument's, when its Array gives it up (see
// TakeDonatedBuffer; `held`: the call's holds on its Array arguments' buffers, null for
// others) and no other argument of the call is the same buffer.
void TakeDonations(const Executable& exe, const std::vector<py::object>& args, std::vector<Argument>& params,
                   const std::vector<std::shared_ptr<Buffer>>& held);

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
