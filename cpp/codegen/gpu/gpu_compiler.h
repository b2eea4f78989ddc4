// GPU program generation: the kernels (gpu_kernel.h) in one module compiled to PTX (or, for
// the emulation, to host code), and the program around them as native host code that
// launches them through the GPU runtime (FjGpuRuntimeApi): loops run on the host, a counted
// loop launches its body's kernels without waiting for them; a loop with a condition reads
// it back each iteration. No LLVM types in this header: the compiler layer includes it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "analysis/buffer_assignment.h"
#include "ir/module.h"
#include "runtime/gpu/gpu_executable.h"

namespace fj::gpu {

struct GpuOptions {
  bool emulated = false;       // kernels for the host emulation instead of PTX
  bool want_ptx = true;        // also the PTX (always for the GPU; for the emulation, on request)
  std::string arch = "sm_80";  // PTX target
  int ptx_version = 0;         // 0: the lowest with `arch` (nvptx.h)
  int opt_level = 3;
  bool keep_llvm_ir = false;   // the kernels' optimised LLVM IR (NVVM form) and the host program's
  // Custom calls with no GPU form run on the host: their C++ kernels.
  std::function<FjKernelFn(const std::string&)> resolve_custom_call;
};

struct GpuCompiled {
  GpuProgram program;
  std::vector<KernelInfo> kernels;
  std::vector<LoopInfo> loops;
  std::string ptx;
  std::string llvm_ir;
};

// libdevice's path ("" when it is not found; see FindLibdevice in nvptx.h).
std::string FindLibdevicePath();
// The newest PTX target this build's LLVM emits ("sm_90").
std::string MaxGpuArch();

// `module` must be kernelized, custom calls with an IR expansion expanded
// (CustomCallExpansionPass); `buffers` is its assignment.
GpuCompiled CompileGpuProgram(const Module& module, const BufferAssignment& buffers, const GpuOptions& options);

}  // namespace fj::gpu
