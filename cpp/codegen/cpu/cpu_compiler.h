// CPU code generation: the whole kernelized entry computation becomes one native function
// (FjEntryFn) that calls its kernels directly, or through the thread pool when they are
// large. Compiled with LLVM's new pass manager and ORC LLJIT for the host CPU.
// No LLVM types in this header: the compiler layer includes it.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "analysis/buffer_assignment.h"
#include "ir/module.h"
#include "runtime/executable.h"
#include "support/abi.h"
#include "support/target.h"

namespace fj::cpu {

struct CpuOptions {
  int vector_width = 8;               // SIMD lanes per step (8 x f32 = one AVX2 register)
  int opt_level = 2;                  // LLVM optimisation level, 0-3
  // The cost model's figures: kernels it does not expect to run in parallel
  // (RunsInParallel, analysis/cost_model.h) run on the calling thread.
  Target target = Target::For(Backend::kCpu);
  bool keep_llvm_ir = false;          // fill CpuProgram::llvm_ir
  bool keep_asm = false;              // fill CpuProgram::assembly
  // Time every kernel launch (CpuProgram::profile): a clock read before and after each.
  bool profile = false;
  // Resolves a custom call's target to its kernel function (the runtime's registry) and
  // whether its range may be split across threads.
  std::function<FjKernelFn(const std::string&, bool* parallel)> resolve_custom_call;
};

struct CpuProgram {
  FjEntryFn entry = nullptr;
  std::shared_ptr<void> code;  // owns the JIT'd code
  std::vector<KernelInfo> kernels;
  std::vector<LoopInfo> loops;
  std::string llvm_ir;   // optimised LLVM IR, when requested
  std::string assembly;  // native assembly, when requested
  // With CpuOptions::profile: per kernel, nanoseconds and launches (interleaved), which the
  // generated code adds to (Executable::Profile).
  std::shared_ptr<std::atomic<int64_t>[]> profile;
};

// `module` must be kernelized (see fusion/kernel_wrapper.h); `buffers` is its assignment.
CpuProgram CompileCpuProgram(const Module& module, const BufferAssignment& buffers,
                             const CpuOptions& options);

// The host CPU as LLVM sees it, e.g. "znver4 (+avx2,+avx512f,...)".
std::string HostCpuDescription();

// The SIMD lanes of 32-bit values the host CPU's vector registers hold, as LLVM tunes for
// it: 16 with full-speed AVX-512, 8 with AVX2, 4 with SSE.
int HostVectorLanes();
// The 32-bit lanes the host's vector units compute per instruction half: HostVectorLanes,
// but 8 where 512-bit registers go through 256-bit units (AMD's Zen 4, "znver4").
int HostVectorUnitLanes();
// Whether this CPU converts f16 <-> f32 in hardware (F16C); FJ_NO_NATIVE_HALF=1 says no,
// to test the integer conversions.
bool HostConvertsHalf();

// Makes LLVM's fatal errors throw fj::Error(kInternal) instead of aborting (idempotent;
// defined with the JIT in jit.cc).
void InstallLlvmErrorHandler();
// Reports an LLVM fatal error, for the test that it becomes an exception.
[[noreturn]] void RaiseLlvmFatalErrorForTesting(const std::string& message);

}  // namespace fj::cpu
