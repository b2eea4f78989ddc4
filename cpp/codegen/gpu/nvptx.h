// LLVM's NVPTX target: a module of GPU kernels to PTX. Kernels are marked as kernels
// (calling convention and nvvm.annotations), math the kernels leave to the C library
// (sinf, pow, ...) comes from libdevice, linked only when a kernel needs it.
#pragma once

#include <string>
#include <vector>

#include "llvm/IR/Module.h"

namespace fj::codegen {

struct PtxOptions {
  std::string arch = "sm_80";  // the PTX target
  int ptx_version = 0;         // the PTX ISA version (0: the lowest that has `arch`)
  int opt_level = 3;
};

struct PtxResult {
  std::string ptx;
  std::string optimized_ir;  // when asked for
};

// Compiles `module` (its kernels named in `kernels`) to PTX. Throws fj::Error naming what
// is missing when the module needs libdevice and none is found.
PtxResult CompileToPtx(llvm::Module& module, const std::vector<std::string>& kernels, const PtxOptions& options,
                       bool keep_ir);

// The newest target and PTX ISA version this LLVM emits ("sm_90", 85).
std::string LlvmMaxArch();
int LlvmMaxPtxVersion();
// The lowest PTX ISA version that has `arch` (sm_80: 70, sm_90: 78).
int MinPtxVersion(const std::string& arch);
// libdevice.10.bc of the CUDA toolkit: FUSIONJIT_LIBDEVICE, $CUDA_HOME, $CUDA_PATH, then the
// usual places; "" when there is none.
std::string FindLibdevice();

}  // namespace fj::codegen
