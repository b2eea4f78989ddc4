// The extension module fusionjit._core: registers every binding and turns fj::Error into
// Python exceptions (InvalidArgument -> FusionJitError(ValueError), Unimplemented ->
// NotImplementedError, ResourceExhausted -> MemoryError, Unavailable -> DeviceError
// (RuntimeError), Internal -> InternalError(RuntimeError)).
#include <pybind11/pybind11.h>

#include "bindings/array.h"
#include "bindings/host_callback.h"
#include "bindings/ir_bindings.h"
#include "bindings/jit_function.h"
#include "bindings/pytree.h"
#include "codegen/cpu/cpu_compiler.h"
#include "compiler/code_cache.h"
#include "runtime/buffer.h"
#include "runtime/custom_calls.h"
#include "runtime/host_callback.h"
#include "runtime/thread_pool.h"
#include "support/error.h"
#include "support/flags.h"
#include "support/target.h"

namespace py = pybind11;

PYBIND11_MODULE(_core, m) {
  m.doc() = "fusionjit's C++ core: IR, passes, LLVM codegen and runtime";
  static py::exception<fj::Error> invalid(m, "FusionJitError", PyExc_ValueError);
  static py::exception<fj::Error> internal(m, "InternalError", PyExc_RuntimeError);
  static py::exception<fj::Error> device(m, "DeviceError", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const fj::Error& e) {
      // A run a host callback failed: the callback's own exception.
      if (fj::py_bindings::RestoreHostCallbackError()) return;
      switch (e.code()) {
        case fj::ErrorCode::kInvalidArgument:
          py::set_error(invalid, e.what());
          break;
        case fj::ErrorCode::kUnimplemented:
          PyErr_SetString(PyExc_NotImplementedError, e.what());
          break;
        case fj::ErrorCode::kResourceExhausted:
          PyErr_SetString(PyExc_MemoryError, e.what());
          break;
        case fj::ErrorCode::kUnavailable:
          py::set_error(device, e.what());
          break;
        case fj::ErrorCode::kInternal:
          py::set_error(internal, (std::string("internal error in fusionjit (please report it): ") + e.what()).c_str());
          break;
      }
    }
  });

  fj::py_bindings::DefineArray(m);
  fj::py_bindings::DefinePyTree(m);
  fj::py_bindings::DefineIr(m);
  fj::py_bindings::DefineJitFunction(m);

  fj::cpu::InstallLlvmErrorHandler();
  // The process's lazily made state, made now, while the importing thread is the only one
  // in fusionjit: a function-local static whose initialiser is running in one thread when
  // another forks stays "being initialised" in the child, whose first use of it then waits
  // forever (a child forked while another thread made its first compilation hung in
  // HostVectorLanes). Each of these registers its fork handlers as it is made.
  fj::GetDebugFlags();
  fj::cpu::HostCpuDescription();  // the JIT engine and its target machine
  fj::cpu::HostVectorLanes();
  fj::cpu::HostConvertsHalf();
  fj::CodeCache::Get();
  fj::CustomCallTargets();
  fj::Buffer::InitializeCache();
  fj::ThreadPool::InstallForkHandlers();
  fj::py_bindings::InitializeDTypeTable();
  fj::HostLastLevelCacheBytes();  // the cost model's cache (hung a child forked mid-compile)
  fj::InitializeHostCallbacks();
  m.def("_raise_llvm_fatal_error_for_testing", &fj::cpu::RaiseLlvmFatalErrorForTesting);
  m.def("host_cpu", &fj::cpu::HostCpuDescription);
  m.def("host_vector_lanes", &fj::cpu::HostVectorLanes);
  m.def("num_threads", [] { return fj::ThreadPool::Global().num_threads(); });
  m.def("set_checks", [](bool on) { fj::GetDebugFlags().checks = on; });
  m.def("checks_enabled", [] { return fj::GetDebugFlags().checks; });
}
