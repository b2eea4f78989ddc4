// The jit fast path (see jit_function.h).
//
// A call is keyed by: the tree structure of the dynamic arguments, the static arguments
// (by Python hash and ==), each leaf's (dtype, shape, weak type), and the configuration
// epoch (bumped by fusionjit.config.update for options that change tracing). The leaf rules
// mirror fusionjit/_src/dtypes.py: Python bool -> bool; int -> weak int32 (int64 with x64);
// float -> weak float32 (float64); NumPy arrays and scalars keep their dtype, canonicalised
// (64-bit types map to 32-bit ones unless x64 is enabled).
#include "bindings/jit_function.h"

#include <frameobject.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "bindings/array.h"
#include "bindings/pytree.h"
#include "runtime/executable.h"
#include "support/error.h"

namespace fj::py_bindings {
namespace {

using namespace pybind11::literals;

bool g_enable_x64 = false;
uint64_t g_config_epoch = 0;

DType Canonical(DType t) {
  if (g_enable_x64) return t;
  switch (t) {
    case DType::kS64: return DType::kS32;
    case DType::kU64: return DType::kU32;
    case DType::kF64: return DType::kF32;
    default: return t;
  }
}

struct LeafSig {
  DType dtype;
  bool weak;
  std::vector<int64_t> shape;
  bool operator==(const LeafSig& o) const {
    return dtype == o.dtype && weak == o.weak && shape == o.shape;
  }
};

// A static argument: its value and its type. 2 and 2.0 are equal with equal hashes in
// Python, but trace to different programs (int32 against float32), so the type is part of
// the key.
struct StaticArg {
  py::object value;
  PyTypeObject* type;
  bool operator==(const StaticArg& o) const { return type == o.type && value.equal(o.value); }
};

struct CallSignature {
  PyTreeDef treedef;
  std::vector<StaticArg> statics;
  std::vector<LeafSig> leaves;
  uint64_t epoch = 0;
  size_t hash = 0;

  bool operator==(const CallSignature& o) const {
    return hash == o.hash && epoch == o.epoch && leaves == o.leaves && statics == o.statics &&
           treedef == o.treedef;
  }
};

// A compiled signature. Held by shared_ptr: a call keeps its entry (and the executable's
// code) alive while it runs without the GIL, whatever clear_cache or an eviction does.
struct CacheEntry {
  std::shared_ptr<Executable> exe;
  PyTreeDef out_treedef;
  std::vector<bool> out_weak;
  bool release_gil = false;
};

// The compiled signatures of one function, least recently used evicted beyond the
// capacity (fusionjit_cache_size). Every operation holds the GIL, but a lookup compares
// signatures with Python code (== of static arguments and pytree node data) that can
// switch threads in its middle. So the table is copied on write: a published table never
// changes, a lookup reads the one it started with, and an insertion publishes a new table
// only if no other thread published one while it ran Python code. No lock is needed, and
// none can be held by another thread when the process forks.
class SignatureCache {
 public:
  std::shared_ptr<CacheEntry> Find(const CallSignature& sig) {
    std::shared_ptr<const Table> table = table_;  // alive until this lookup ends
    auto it = table->find(&sig);
    if (it == table->end()) return nullptr;
    it->second->last_used = ++clock_;
    return it->second->entry;
  }
  void Insert(CallSignature sig, std::shared_ptr<CacheEntry> entry, size_t capacity) {
    auto node = std::make_shared<Node>(Node{std::move(sig), std::move(entry), ++clock_});
    for (;;) {
      std::shared_ptr<const Table> old = table_;  // replaced tables die after the loop
      if (old->count(&node->sig)) return;  // another thread compiled it first
      auto table = std::make_shared<Table>(*old);
      table->emplace(&node->sig, node);
      EvictBeyond(*table, std::max<size_t>(capacity, 1));
      if (table_ != old) continue;  // published meanwhile: start again from that table
      table_ = std::move(table);
      return;
    }
  }
  size_t size() const { return table_->size(); }
  void Clear() {
    std::shared_ptr<const Table> dropped = std::move(table_);  // destroyed after the swap
    table_ = std::make_shared<const Table>();
  }

 private:
  struct Node {
    CallSignature sig;
    std::shared_ptr<CacheEntry> entry;
    uint64_t last_used;  // clock_ at the last lookup that found it
  };
  struct Hash {
    size_t operator()(const CallSignature* s) const { return s->hash; }
  };
  struct Eq {
    bool operator()(const CallSignature* a, const CallSignature* b) const { return *a == *b; }
  };
  using Table = std::unordered_map<const CallSignature*, std::shared_ptr<Node>, Hash, Eq>;

  static void EvictBeyond(Table& table, size_t capacity) {
    if (table.size() <= capacity) return;
    std::vector<std::pair<uint64_t, const CallSignature*>> by_use;
    by_use.reserve(table.size());
    for (const auto& [key, node] : table) by_use.emplace_back(node->last_used, key);
    size_t excess = table.size() - capacity;
    std::nth_element(by_use.begin(), by_use.begin() + (excess - 1), by_use.end());
    // Erasing by iterator: erasing by key would compare signatures with Python code.
    std::unordered_set<const CallSignature*> doomed;
    for (size_t i = 0; i < excess; ++i) doomed.insert(by_use[i].second);
    for (auto it = table.begin(); it != table.end();) {
      it = doomed.count(it->first) ? table.erase(it) : std::next(it);
    }
  }

  std::shared_ptr<const Table> table_ = std::make_shared<const Table>();
  uint64_t clock_ = 0;
};

size_t g_cache_capacity = 1024;
bool g_disable_jit = false;

// What the fast path extracted from one leaf.
struct LeafValue {
  LeafSig sig;
  const void* data = nullptr;
  const Buffer* buffer = nullptr;  // an Array's (host or device memory)
  // The call's hold on it, from here on: Python code that runs before the call (a static
  // argument's ==) may let another thread delete or donate the array.
  std::shared_ptr<Buffer> held;
  uint64_t scalar = 0;  // storage for Python scalars
  bool is_scalar = false;
};

// Classifies a leaf; returns false if the fast path cannot handle it (tracers, objects
// that are not arrays, dtypes that need conversion): the call then goes to Python.
bool ClassifyLeaf(py::handle h, LeafValue& out, std::vector<py::object>& keep_alive) {
  PyObject* p = h.ptr();
  if (Py_TYPE(p) == ArrayType()) {
    const PyArray& a = h.cast<const PyArray&>();
    if (Canonical(a.dtype) != a.dtype || !a.buffer) return false;  // (deleted: Python raises)
    out.sig = {a.dtype, a.weak_type, a.shape};
    out.held = a.buffer;
    out.buffer = out.held.get();
    return true;
  }
  if (PyBool_Check(p)) {
    out.sig = {DType::kPred, false, {}};
    out.scalar = p == Py_True ? 1 : 0;
    out.is_scalar = true;
    return true;
  }
  if (PyLong_CheckExact(p)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(p, &overflow);
    if (overflow) return false;
    if (g_enable_x64) {
      out.sig = {DType::kS64, true, {}};
      std::memcpy(&out.scalar, &v, 8);
    } else {
      if (v < INT32_MIN || v > INT32_MAX) return false;  // Python raises the overflow error
      int32_t v32 = static_cast<int32_t>(v);
      out.sig = {DType::kS32, true, {}};
      std::memcpy(&out.scalar, &v32, 4);
    }
    out.is_scalar = true;
    return true;
  }
  if (PyFloat_CheckExact(p)) {
    double v = PyFloat_AS_DOUBLE(p);
    if (g_enable_x64) {
      out.sig = {DType::kF64, true, {}};
      std::memcpy(&out.scalar, &v, 8);
    } else {
      float f = static_cast<float>(v);
      out.sig = {DType::kF32, true, {}};
      std::memcpy(&out.scalar, &f, 4);
    }
    out.is_scalar = true;
    return true;
  }
  // NumPy arrays and NumPy scalars (strongly typed): passed in place when they already
  // have the canonical dtype and layout, else converted once for this call.
  static PyObject* numpy_generic = py::object(py::module_::import("numpy").attr("generic")).release().ptr();
  bool is_array = py::isinstance<py::array>(h);
  if (is_array || PyObject_IsInstance(p, numpy_generic) == 1) {
    py::array a = is_array ? py::reinterpret_borrow<py::array>(h) : py::array::ensure(h);
    if (!a) return false;
    std::optional<DType> t = DTypeFromNumpy(a.dtype());
    if (!t) return false;  // Python raises the unsupported-dtype error
    DType c = Canonical(*t);
    bool aligned = reinterpret_cast<uintptr_t>(a.data()) % DTypeBytes(*t) == 0;
    if (c != *t || !IsNativeByteOrder(a.dtype()) || !(a.flags() & py::array::c_style) || !aligned) {
      a = py::array::ensure(a.attr("astype")(NumpyDType(c)), py::array::c_style);
      if (!a) return false;
    }
    out.sig = {c, false, std::vector<int64_t>(a.shape(), a.shape() + a.ndim())};
    out.data = a.data();
    keep_alive.push_back(a);
    return true;
  }
  return false;
}

std::string CallerLocation() {
  PyFrameObject* frame = PyEval_GetFrame();
  if (!frame) return "<unknown>";
  PyCodeObject* code = PyFrame_GetCode(frame);
  std::string file = py::str(code->co_filename).cast<std::string>();
  int line = PyFrame_GetLineNumber(frame);
  Py_DECREF(code);
  return file + ":" + std::to_string(line);
}

class JitFunction {
 public:
  JitFunction(py::function fun, std::vector<int> static_argnums, std::vector<std::string> static_argnames,
              bool primitive)
      : fun_(std::move(fun)),
        static_argnums_(std::move(static_argnums)), static_argnames_(std::move(static_argnames)),
        primitive_(primitive) {}

  // `self` is this object's Python side, whose _cache_miss traces and compiles. (It is
  // looked up per miss, not held: a bound method held here would be a reference cycle the
  // garbage collector cannot see, and no jit object would ever be freed.)
  py::object Call(py::handle self, py::args args, py::kwargs kwargs) {
    // fusionjit_disable_jit holds for signatures compiled before it was set too. Primitives
    // always compile: they are what runs eagerly.
    if (g_disable_jit && !primitive_) return Miss(self, args, kwargs, nullptr);
    // Split static from dynamic arguments.
    CallSignature sig;
    sig.epoch = g_config_epoch;
    size_t nargs = args.size();
    py::list dyn_args;
    for (size_t i = 0; i < nargs; ++i) {
      if (IsStaticPosition(static_cast<int>(i), static_cast<int>(nargs))) {
        sig.statics.push_back({args[i], Py_TYPE(args[i].ptr())});
      } else {
        dyn_args.append(args[i]);
      }
    }
    size_t static_positional = sig.statics.size();
    py::dict dyn_kwargs;
    if (kwargs) {
      for (auto [k, v] : kwargs) {
        std::string name = py::cast<std::string>(k);
        if (IsStaticName(name)) {
          sig.statics.push_back({py::make_tuple(k, v), Py_TYPE(v.ptr())});
        } else {
          dyn_kwargs[k] = v;
        }
      }
    }
    size_t h = 0;
    for (size_t i = 0; i < sig.statics.size(); ++i) {
      Py_hash_t sh = PyObject_Hash(sig.statics[i].value.ptr());
      if (sh == -1) {
        PyErr_Clear();
        // Static keyword arguments are stored as (name, value) pairs: name the value's type.
        py::handle bad = sig.statics[i].value;
        if (i >= static_positional && PyTuple_Check(bad.ptr()) && PyTuple_GET_SIZE(bad.ptr()) == 2) {
          bad = PyTuple_GET_ITEM(bad.ptr(), 1);
        }
        throw py::type_error(
            CallerLocation() + ": a static argument of jit(" + FunctionName() + ") has type " +
            py::str(py::type::handle_of(bad).attr("__name__")).cast<std::string>() +
            ", which is not hashable. Static arguments are part of the compilation cache key, so "
            "they must be hashable: pass a tuple instead of a list, or make the argument dynamic.");
      }
      h = (h * 1000003u ^ static_cast<size_t>(sh)) * 31 + reinterpret_cast<uintptr_t>(sig.statics[i].type);
    }

    std::vector<py::object> leaves;
    py::tuple dyn = py::make_tuple(py::tuple(dyn_args), dyn_kwargs);
    sig.treedef = PyTreeDef::Flatten(dyn, leaves);
    std::vector<LeafValue> values(leaves.size());
    std::vector<py::object> keep_alive;
    bool fast = true;
    for (size_t i = 0; i < leaves.size() && fast; ++i) {
      fast = ClassifyLeaf(leaves[i], values[i], keep_alive);
    }
    // (A miss runs the call from Python, which takes its own holds: a donation must find
    // none but its own.)
    if (!fast) {
      values.clear();
      return Miss(self, args, kwargs, nullptr);
    }
    sig.leaves.reserve(values.size());
    for (LeafValue& v : values) {
      sig.leaves.push_back(v.sig);
      h = h * 1000003u ^ (static_cast<size_t>(v.sig.dtype) * 2 + v.sig.weak);
      for (int64_t d : v.sig.shape) h = h * 31 + static_cast<size_t>(d);
    }
    sig.hash = h ^ sig.treedef.Hash() ^ (sig.epoch * 0x9e3779b97f4a7c15ull);

    std::shared_ptr<CacheEntry> entry = cache_.Find(sig);
    if (!entry) {
      values.clear();
      return Miss(self, args, kwargs, &sig);
    }
    return Run(*entry, values, leaves);
  }

  size_t cache_size() { return cache_.size(); }
  void clear() { cache_.Clear(); }
  const py::function& fun() const { return fun_; }

 private:
  bool IsStaticPosition(int i, int n) const {
    for (int s : static_argnums_) {
      if (s == i || (s < 0 && s + n == i)) return true;
    }
    return false;
  }
  bool IsStaticName(const std::string& name) const {
    for (const std::string& s : static_argnames_) {
      if (s == name) return true;
    }
    return false;
  }
  std::string FunctionName() const {
    py::object name = py::getattr(fun_, "__name__", py::str("<function>"));
    return py::str(name).cast<std::string>();
  }

  py::object Run(const CacheEntry& entry, std::vector<LeafValue>& values, std::vector<py::object>& leaves) {
    const Executable& exe = *entry.exe;
    std::vector<Argument> params(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      params[i].host = values[i].is_scalar ? static_cast<const void*>(&values[i].scalar) : values[i].data;
      params[i].buffer = values[i].buffer;
    }
    // The holds move here, for the run (a donation must find none but the call's own).
    std::vector<std::shared_ptr<Buffer>> held;
    if (!exe.output_aliases().empty()) {
      held.resize(values.size());
      for (size_t i = 0; i < values.size(); ++i) held[i] = std::move(values[i].held);
      TakeDonations(exe, leaves, params, held);
    }
    const std::vector<Shape>& out_shapes = exe.output_shapes();
    std::vector<std::shared_ptr<Buffer>> outs;
    if (entry.release_gil) {
      py::gil_scoped_release release;
      outs = exe.Run(params);
    } else {
      outs = exe.Run(params);
    }
    std::vector<py::object> out_leaves;
    out_leaves.reserve(outs.size());
    for (size_t i = 0; i < outs.size(); ++i) {
      PyArray a;
      a.buffer = std::move(outs[i]);
      a.dtype = out_shapes[i].dtype();
      a.shape = out_shapes[i].dims();
      a.weak_type = entry.out_weak[i];
      out_leaves.push_back(WrapArray(std::move(a)));
    }
    return entry.out_treedef.Unflatten(out_leaves);
  }

  // Python traces and compiles, runs the call and replies (kind, info, result): kind
  // "entry" with info = (executable, out_treedef, out_weak_types) to cache, or "result"
  // when the call cannot be cached (tracer arguments: jit inside a trace).
  py::object Miss(py::handle self, py::args args, py::kwargs kwargs, const CallSignature* sig) {
    py::tuple reply = self.attr("_cache_miss")(args, kwargs ? kwargs : py::dict());
    std::string kind = reply[0].cast<std::string>();
    if (kind != "entry" || sig == nullptr) return reply[2];
    py::tuple info = reply[1];
    auto entry = std::make_shared<CacheEntry>();
    entry->exe = info[0].cast<std::shared_ptr<Executable>>();
    entry->out_treedef = info[1].cast<PyTreeDef>();
    for (py::handle w : info[2]) entry->out_weak.push_back(w.cast<bool>());
    const std::vector<Shape>& params = entry->exe->parameter_shapes();
    if (params.size() != sig->leaves.size()) {
      throw py::value_error("internal error in fusionjit: traced " + std::to_string(params.size()) +
                            " parameters for " + std::to_string(sig->leaves.size()) + " leaves");
    }
    for (size_t i = 0; i < params.size(); ++i) {
      if (params[i].dtype() != sig->leaves[i].dtype || params[i].dims() != sig->leaves[i].shape) {
        throw py::value_error("internal error in fusionjit: parameter " + std::to_string(i) + " is " +
                              params[i].ToString() + " but the argument's signature differs");
      }
    }
    int64_t bytes = entry->exe->temp_bytes();
    for (const Shape& s : entry->exe->output_shapes()) bytes += s.ByteSize();
    for (const Shape& s : params) bytes += s.ByteSize();
    bool parallel = false;
    for (const KernelInfo& k : entry->exe->kernels()) parallel = parallel || k.parallel;
    // Small programs keep the GIL: releasing and taking it back costs more than they run.
    // GPU programs release it: their host side may wait for the device.
    entry->release_gil = parallel || bytes > (256 << 10) || entry->exe->backend() != Backend::kCpu;
    cache_.Insert(*sig, std::move(entry), g_cache_capacity);
    return reply[2];
  }

  py::function fun_;
  std::vector<int> static_argnums_;
  std::vector<std::string> static_argnames_;
  bool primitive_;
  SignatureCache cache_;
};

}  // namespace

void DefineJitFunction(py::module_& m) {
  py::class_<JitFunction>(m, "JitFunction", py::dynamic_attr())
      .def(py::init<py::function, std::vector<int>, std::vector<std::string>, bool>(), "fun"_a,
           "static_argnums"_a, "static_argnames"_a, "primitive"_a = false)
      .def("__call__", [](py::handle self, py::args args, py::kwargs kwargs) {
        return self.cast<JitFunction&>().Call(self, std::move(args), std::move(kwargs));
      })
      .def("_cache_size", &JitFunction::cache_size)
      .def("_clear_cache", &JitFunction::clear);
  m.def("set_enable_x64", [](bool on) {
    g_enable_x64 = on;
    ++g_config_epoch;
  });
  m.def("bump_config_epoch", [] { ++g_config_epoch; });
  m.def("set_disable_jit", [](bool on) { g_disable_jit = on; });
  m.def("set_cache_capacity", [](int64_t n) { g_cache_capacity = static_cast<size_t>(std::max<int64_t>(n, 1)); });
}

}  // namespace fj::py_bindings
