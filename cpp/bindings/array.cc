// fusionjit.Array (see array.h). Operators and methods written in Python are attached to
// the class by fusionjit/_src/array.py.
#include "bindings/array.h"

#include <pybind11/stl.h>

#include <cstring>

#include "support/error.h"

namespace fj::py_bindings {
namespace {

PyTypeObject* g_array_type = nullptr;

}  // namespace

int64_t PyArray::size() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

const std::shared_ptr<Buffer>& LiveBuffer(const PyArray& a) {
  if (!a.buffer) {
    std::string dims;
    for (size_t i = 0; i < a.shape.size(); ++i) dims += (i ? "," : "") + std::to_string(a.shape[i]);
    throw std::runtime_error("Array has been deleted with shape=" + py::str(NumpyDType(a.dtype)).cast<std::string>() +
                             "[" + dims + "].");
  }
  return a.buffer;
}

std::shared_ptr<Buffer> TakeDonatedBuffer(PyArray& a, const std::shared_ptr<Buffer>& held) {
  // With the GIL held, no other thread can take a reference meanwhile: the array's own and
  // the call's hold are all there are.
  if (!a.buffer || a.buffer != held || held.use_count() != 2 || !held->OwnsHostMemory()) return nullptr;
  a.buffer.reset();
  held->DropCopies();
  return held;
}

void TakeDonations(const Executable& exe, const std::vector<py::object>& args, std::vector<Argument>& params,
                   const std::vector<std::shared_ptr<Buffer>>& held) {
  for (const OutputAlias& alias : exe.output_aliases()) {
    if (alias.parameter < 0) continue;
    size_t p = static_cast<size_t>(alias.parameter);
    py::handle arg = args.at(p);
    if (!held.at(p) || !py::isinstance<PyArray>(arg)) continue;
    bool shared = false;
    for (size_t i = 0; i < params.size() && !shared; ++i) shared = i != p && params[i].buffer == held[p].get();
    if (shared) continue;
    params[p].donated = TakeDonatedBuffer(arg.cast<PyArray&>(), held[p]);
  }
}

namespace {

// bfloat16 is not a NumPy type: the ml_dtypes package (as JAX uses) registers it. Its type
// number is known once ml_dtypes is imported; -1 until then, or when it is not installed.
int BFloat16TypeNum(bool import) {
  static int num = -1;
  if (num < 0) {
    py::module_ sys = py::module_::import("sys");
    bool loaded = sys.attr("modules").contains("ml_dtypes");
    if (loaded || import) {
      try {
        num = py::dtype::from_args(py::module_::import("ml_dtypes").attr("bfloat16")).num();
      } catch (py::error_already_set&) {
        return -1;
      }
    }
  }
  return num;
}

}  // namespace

int NumpyTypeNum(DType t) {
  switch (t) {
    case DType::kPred: return py::detail::npy_api::NPY_BOOL_;
    case DType::kS8: return py::dtype::of<int8_t>().num();
    case DType::kS16: return py::dtype::of<int16_t>().num();
    case DType::kS32: return py::dtype::of<int32_t>().num();
    case DType::kS64: return py::dtype::of<int64_t>().num();
    case DType::kU8: return py::dtype::of<uint8_t>().num();
    case DType::kU16: return py::dtype::of<uint16_t>().num();
    case DType::kU32: return py::dtype::of<uint32_t>().num();
    case DType::kU64: return py::dtype::of<uint64_t>().num();
    case DType::kF16: return py::dtype("float16").num();
    case DType::kBF16: return BFloat16TypeNum(/*import=*/false);
    case DType::kF32: return py::detail::npy_api::NPY_FLOAT_;
    case DType::kF64: return py::detail::npy_api::NPY_DOUBLE_;
  }
  return -1;
}

py::dtype NumpyDType(DType t) {
  static py::dtype* cache[kNumDTypes] = {};
  int i = static_cast<int>(t);
  if (!cache[i]) {
    if (t == DType::kBF16) {
      FJ_CHECK(BFloat16TypeNum(/*import=*/true) >= 0, "bfloat16 arrays need the ml_dtypes package");
      cache[i] = new py::dtype(py::dtype::from_args(py::module_::import("ml_dtypes").attr("bfloat16")));
    } else {
      cache[i] = new py::dtype(NumpyTypeNum(t));
    }
  }
  return *cache[i];
}

bool IsNativeByteOrder(const py::dtype& d) {
  char order = d.byteorder();  // '=' native, '|' not applicable, '<' or '>' explicit
  constexpr char kOther = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? '>' : '<';
  return order != kOther;
}

std::optional<DType> DTypeFromNumpy(const py::dtype& d) {
  static const std::vector<int> nums = [] {
    std::vector<int> v(kNumDTypes);
    for (DType t : kAllDTypes) v[static_cast<int>(t)] = t == DType::kBF16 ? -1 : NumpyTypeNum(t);
    return v;
  }();
  int num = d.num();
  for (DType t : kAllDTypes) {
    int n = t == DType::kBF16 ? BFloat16TypeNum(/*import=*/false) : nums[static_cast<int>(t)];
    if (n == num && d.itemsize() == DTypeBytes(t)) return t;
  }
  return std::nullopt;
}

void InitializeDTypeTable() { DTypeFromNumpy(py::dtype::of<float>()); }

py::array NumpyView(const PyArray& a) {
  std::vector<py::ssize_t> shape(a.shape.begin(), a.shape.end());
  std::vector<py::ssize_t> strides(shape.size());
  py::ssize_t stride = DTypeBytes(a.dtype);
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    strides[i] = stride;
    stride *= shape[i];
  }
  auto* keep = new std::shared_ptr<Buffer>(LiveBuffer(a));
  py::capsule base(keep, [](void* p) { delete static_cast<std::shared_ptr<Buffer>*>(p); });
  // Device memory is copied to the host once (HostData), when NumPy first asks for it.
  const void* host = (*keep)->HostData();
  py::array out(NumpyDType(a.dtype), shape, strides, host, base);
  py::detail::array_proxy(out.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return out;
}

namespace {

// A PyArray of `x`'s dtype `t` and shape, without a buffer yet.
PyArray ArrayHeader(const py::array& x, DType t, bool weak_type) {
  PyArray a;
  a.dtype = t;
  a.weak_type = weak_type;
  for (int i = 0; i < x.ndim(); ++i) a.shape.push_back(x.shape(i));
  return a;
}

}  // namespace

PyArray ArrayFromNumpy(const py::array& x, bool weak_type) {
  std::optional<DType> t = DTypeFromNumpy(x.dtype());
  if (!t) {
    throw py::type_error("fusionjit does not support arrays of dtype " +
                         py::str(x.dtype()).cast<std::string>());
  }
  // Non-native byte order (e.g. '>f4' read from a file) is converted, as NumPy and JAX do.
  py::array c = IsNativeByteOrder(x.dtype()) ? py::array::ensure(x, py::array::c_style)
                                             : py::array::ensure(x.attr("astype")(NumpyDType(*t)),
                                                                 py::array::c_style);
  PyArray a = ArrayHeader(c, *t, weak_type);
  a.buffer = Buffer::Allocate(a.nbytes());
  if (a.nbytes() > 0) std::memcpy(a.buffer->data(), c.data(), a.nbytes());
  return a;
}

std::optional<PyArray> ArrayViewOfNumpy(const py::array& x, bool weak_type) {
  std::optional<DType> t = DTypeFromNumpy(x.dtype());
  bool contiguous = (x.flags() & py::array::c_style) != 0;
  if (!t || !IsNativeByteOrder(x.dtype()) || !contiguous || x.dtype().itemsize() != DTypeBytes(*t)) return std::nullopt;
  void* data = const_cast<void*>(x.data());
  if (reinterpret_cast<uintptr_t>(data) % Buffer::kAlignment != 0) return std::nullopt;
  PyArray a = ArrayHeader(x, *t, weak_type);
  // The NumPy array (and through it the exporter's memory) lives as long as the buffer.
  auto* owner = new py::object(x);
  a.buffer = Buffer::Wrap(data, a.nbytes(), [owner] {
    if (!Py_IsInitialized()) return;  // at exit: leak rather than touch a dead interpreter
    py::gil_scoped_acquire gil;
    delete owner;
  });
  return a;
}

PyTypeObject* ArrayType() { return g_array_type; }

py::object WrapArray(PyArray a) { return py::cast(std::move(a)); }

void DefineArray(py::module_& m) {
  using namespace pybind11::literals;
  py::class_<PyArray> cls(m, "Array", py::buffer_protocol(), py::dynamic_attr());
  cls.def_property_readonly("shape", [](const PyArray& a) {
        py::tuple t(a.shape.size());
        for (size_t i = 0; i < a.shape.size(); ++i) t[i] = a.shape[i];
        return t;
      })
      .def_property_readonly("dtype", [](const PyArray& a) { return NumpyDType(a.dtype); })
      .def_property_readonly("ndim", [](const PyArray& a) { return a.shape.size(); })
      .def_property_readonly("size", &PyArray::size)
      .def_property_readonly("nbytes", &PyArray::nbytes)
      .def_property_readonly("itemsize", [](const PyArray& a) { return DTypeBytes(a.dtype); })
      .def_property_readonly("weak_type", [](const PyArray& a) { return a.weak_type; })
      .def("_numpy_view", &NumpyView)
      .def("__array__",
           [](const PyArray& a, py::object dtype, py::object copy) -> py::object {
             py::array view = NumpyView(a);
             bool want_copy = !copy.is_none() && copy.cast<bool>();
             if (!dtype.is_none()) return view.attr("astype")(dtype);
             if (want_copy) return view.attr("copy")();
             return view;
           },
           "dtype"_a = py::none(), "copy"_a = py::none())
      .def("block_until_ready",
           [](py::object self) {
             const PyArray& a = self.cast<const PyArray&>();
             if (Device* d = LiveBuffer(a)->device()) {
               py::gil_scoped_release release;
               d->Synchronize();
             }
             return self;
           })
      .def_property_readonly("_device", [](const PyArray& a) {
        Device* d = LiveBuffer(a)->device();
        return d ? d->Describe() : std::string("cpu");
      })
      .def("is_deleted", [](const PyArray& a) { return !a.buffer; })
      .def("delete", [](PyArray& a) { a.buffer.reset(); })
      ;
  // The buffer protocol (NumPy's first way in) exports a NumPy view's buffer: the export
  // then holds the array's buffer, as every view does (a held view keeps a donation from
  // taking it over; a deleted array leaves its views valid).
  PyBufferProcs* procs = reinterpret_cast<PyTypeObject*>(cls.ptr())->tp_as_buffer;
  procs->bf_getbuffer = [](PyObject* self, Py_buffer* view, int flags) -> int {
    try {
      const PyArray& a = py::handle(self).cast<const PyArray&>();
      // PEP 3118 has no format for bfloat16: NumPy then takes the array through __array__.
      if (a.dtype == DType::kBF16) throw py::buffer_error("bfloat16 has no buffer format; use numpy.asarray");
      py::array v = NumpyView(a);
      return PyObject_GetBuffer(v.ptr(), view, flags);
    } catch (py::error_already_set& e) {
      e.restore();
    } catch (const std::exception& e) {
      py::set_error(PyExc_BufferError, e.what());
    }
    view->obj = nullptr;
    return -1;
  };
  procs->bf_releasebuffer = nullptr;  // the view's own release runs (it is view->obj)
  m.def("array_from_numpy", &ArrayFromNumpy, "x"_a, "weak_type"_a = false);
  m.def("array_view_of_numpy", &ArrayViewOfNumpy, "x"_a, "weak_type"_a = false);
  g_array_type = reinterpret_cast<PyTypeObject*>(cls.ptr());
}

}  // namespace fj::py_bindings
