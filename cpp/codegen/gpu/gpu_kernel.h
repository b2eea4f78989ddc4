// GPU kernels: the shared kernel body (kernel_emitter.h) wrapped in a grid-stride loop over
// the kernel's units, one thread per unit; or one warp per unit where the unit is a row to
// reduce (row reductions, row-fused kernels: the lanes share the row and combine with
// shuffles); whole-loop kernels run a lane per thread, their per-step reductions combined
// per warp. Parameters: one pointer per buffer, outputs first.
#pragma once

#include <string>

#include "codegen/gpu/gpu_intrinsics.h"
#include "codegen/kernel_emitter.h"
#include "runtime/gpu/gpu_device.h"

namespace fj::codegen {

struct GpuKernel {
  llvm::Function* function = nullptr;
  GpuKernelSpec spec;
  KernelPlan plan;
};

// Emits the kernel of `fusion` into `module`. `in_place`: its output is its updated
// operand's buffer (buffer assignment's WritesInPlace).
GpuKernel EmitGpuKernel(llvm::Module& module, const Instruction* fusion, const std::string& name, bool in_place,
                        const GpuIntrinsics& intrinsics);

// Rows shorter than this are reduced by one thread each: a warp would leave lanes idle.
constexpr int64_t kMinWarpRow = 32;

}  // namespace fj::codegen
