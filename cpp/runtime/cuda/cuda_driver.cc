// Loading the CUDA driver (see cuda_driver.h).
#include "runtime/cuda/cuda_driver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "support/error.h"

namespace fj::cuda {
namespace {

struct Loaded {
  Driver driver{};
  bool ok = false;
  std::string why;
};

Loaded LoadOnce() {
  Loaded l;
  const char* override_path = std::getenv("FUSIONJIT_CUDA_LIBRARY");
  std::string path = override_path && *override_path ? override_path : "libcuda.so.1";
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* err = dlerror();
    l.why = "the CUDA driver (" + path + ") could not be loaded: " + (err ? err : "unknown error") +
            " (is there an NVIDIA GPU and its driver?)";
    return l;
  }
  bool missing = false;
  auto get = [&](auto& fn, const char* name, const char* versioned = nullptr) {
    void* p = versioned ? dlsym(lib, versioned) : nullptr;
    if (!p) p = dlsym(lib, name);
    if (!p && !missing) {
      missing = true;
      l.why = "the CUDA driver " + path + " has no " + name + " (too old a driver?)";
    }
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
  };
  Driver& d = l.driver;
  get(d.cuInit, "cuInit");
  get(d.cuDriverGetVersion, "cuDriverGetVersion");
  get(d.cuDeviceGetCount, "cuDeviceGetCount");
  get(d.cuDeviceGet, "cuDeviceGet");
  get(d.cuDeviceGetName, "cuDeviceGetName");
  get(d.cuDeviceGetAttribute, "cuDeviceGetAttribute");
  get(d.cuDeviceTotalMem, "cuDeviceTotalMem", "cuDeviceTotalMem_v2");
  get(d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  get(d.cuCtxSetCurrent, "cuCtxSetCurrent");
  get(d.cuStreamCreate, "cuStreamCreate");
  get(d.cuStreamSynchronize, "cuStreamSynchronize");
  get(d.cuMemAlloc, "cuMemAlloc", "cuMemAlloc_v2");
  get(d.cuMemFree, "cuMemFree", "cuMemFree_v2");
  get(d.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync", "cuMemcpyHtoDAsync_v2");
  get(d.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync", "cuMemcpyDtoHAsync_v2");
  get(d.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync", "cuMemcpyDtoDAsync_v2");
  get(d.cuModuleLoadDataEx, "cuModuleLoadDataEx");
  get(d.cuModuleGetFunction, "cuModuleGetFunction");
  get(d.cuModuleUnload, "cuModuleUnload");
  get(d.cuLaunchKernel, "cuLaunchKernel");
  get(d.cuGetErrorName, "cuGetErrorName");
  get(d.cuGetErrorString, "cuGetErrorString");
  if (missing) return l;
  CUresult r = d.cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char* name = nullptr;
    if (d.cuGetErrorName(r, &name) != CUDA_SUCCESS) name = nullptr;
    l.why = std::string("the CUDA driver did not start: cuInit failed with ") + (name ? name : std::to_string(r)) +
            " (no usable GPU?)";
    return l;
  }
  l.ok = true;
  return l;
}

}  // namespace

const Driver* LoadDriver(std::string* why) {
  static const Loaded loaded = LoadOnce();
  if (!loaded.ok) {
    if (why) *why = loaded.why;
    return nullptr;
  }
  return &loaded.driver;
}

void Check(const Driver& d, CUresult result, const char* call, const std::string& what) {
  if (result == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* text = nullptr;
  if (d.cuGetErrorName(result, &name) != CUDA_SUCCESS) name = nullptr;
  if (d.cuGetErrorString(result, &text) != CUDA_SUCCESS) text = nullptr;
  std::string message = StrCat("CUDA error while ", what, ": ", call, " returned ", name ? name : "error",
                               " (", result, ")", text ? std::string(": ") + text : std::string());
  if (result == CUDA_ERROR_OUT_OF_MEMORY) throw Error(ErrorCode::kResourceExhausted, message);
  throw Error(ErrorCode::kUnavailable, message);
}

}  // namespace fj::cuda
