/* A fake CUDA driver (libcuda.so.1) for testing fusionjit's driver wrapper without a GPU:
 * device memory is host memory, copies are memcpy, modules load anything and launches do
 * nothing. FAKE_CUDA selects a failure: "no_device" (cuDeviceGetCount finds none),
 * "init_fails" (cuInit), "oom" (every cuMemAlloc), "launch_fails" (cuLaunchKernel),
 * "load_fails" (cuModuleLoadDataEx, with a log). Built by the tests with the C compiler. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
enum { OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, NO_DEVICE = 100, INVALID_PTX = 218, LAUNCH_FAILED = 719 };

static int mode(const char* m) {
  const char* f = getenv("FAKE_CUDA");
  return f && strcmp(f, m) == 0;
}

CUresult cuInit(unsigned flags) { (void)flags; return mode("init_fails") ? NO_DEVICE : OK; }
CUresult cuDriverGetVersion(int* v) { *v = 13000; return OK; }
CUresult cuDeviceGetCount(int* n) { *n = mode("no_device") ? 0 : 1; return OK; }
CUresult cuDeviceGet(int* d, int ordinal) { *d = ordinal; return OK; }
CUresult cuDeviceGetName(char* name, int len, int d) {
  (void)d;
  strncpy(name, "Fake GPU", (size_t)len);
  return OK;
}
CUresult cuDeviceGetAttribute(int* v, int attribute, int d) {
  (void)d;
  switch (attribute) {
    case 16: *v = 4; break;   /* multiprocessors */
    case 75: *v = 9; break;   /* compute capability major */
    case 76: *v = 0; break;   /* minor */
    default: *v = 0;
  }
  return OK;
}
CUresult cuDeviceTotalMem_v2(size_t* bytes, int d) { (void)d; *bytes = (size_t)1 << 30; return OK; }
CUresult cuDevicePrimaryCtxRetain(void** ctx, int d) { (void)d; *ctx = (void*)0x1; return OK; }
CUresult cuCtxSetCurrent(void* ctx) { (void)ctx; return OK; }
CUresult cuStreamCreate(void** s, unsigned flags) { (void)flags; *s = (void*)0x2; return OK; }
CUresult cuStreamSynchronize(void* s) { (void)s; return OK; }
CUresult cuMemAlloc_v2(uint64_t* p, size_t bytes) {
  if (mode("oom")) return OUT_OF_MEMORY;
  void* m = malloc(bytes ? bytes : 1);
  if (!m) return OUT_OF_MEMORY;
  *p = (uint64_t)(uintptr_t)m;
  return OK;
}
CUresult cuMemFree_v2(uint64_t p) { free((void*)(uintptr_t)p); return OK; }
CUresult cuMemcpyHtoDAsync_v2(uint64_t dst, const void* src, size_t n, void* s) {
  (void)s; memcpy((void*)(uintptr_t)dst, src, n); return OK;
}
CUresult cuMemcpyDtoHAsync_v2(void* dst, uint64_t src, size_t n, void* s) {
  (void)s; memcpy(dst, (const void*)(uintptr_t)src, n); return OK;
}
CUresult cuMemcpyDtoDAsync_v2(uint64_t dst, uint64_t src, size_t n, void* s) {
  (void)s; memmove((void*)(uintptr_t)dst, (const void*)(uintptr_t)src, n); return OK;
}
CUresult cuModuleLoadDataEx(void** m, const void* image, unsigned n, int* options, void** values) {
  (void)image;
  if (mode("load_fails")) {
    for (unsigned i = 0; i < n; ++i) {
      if (options[i] == 5) strcpy((char*)values[i], "ptxas fatal: fake failure");
    }
    return INVALID_PTX;
  }
  *m = (void*)0x3;
  return OK;
}
CUresult cuModuleGetFunction(void** f, void* m, const char* name) { (void)m; (void)name; *f = (void*)0x4; return OK; }
CUresult cuModuleUnload(void* m) { (void)m; return OK; }
CUresult cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void* s, void** params, void** extra) {
  (void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)shared; (void)s; (void)params;
  (void)extra;
  return mode("launch_fails") ? LAUNCH_FAILED : OK;
}
CUresult cuGetErrorName(CUresult e, const char** name) {
  switch (e) {
    case OUT_OF_MEMORY: *name = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case NO_DEVICE: *name = "CUDA_ERROR_NO_DEVICE"; break;
    case INVALID_PTX: *name = "CUDA_ERROR_INVALID_PTX"; break;
    case LAUNCH_FAILED: *name = "CUDA_ERROR_LAUNCH_FAILED"; break;
    default: *name = "CUDA_ERROR_UNKNOWN";
  }
  return OK;
}
CUresult cuGetErrorString(CUresult e, const char** text) { (void)e; *text = "a fake failure"; return OK; }
