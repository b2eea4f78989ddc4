// The compiler: Module + options -> Executable. Runs the pass pipeline (pipelines.cc),
// forms kernels, assigns buffers and generates code for the CPU.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "fusion/fusion_decision.h"
#include "ir/module.h"
#include "passes/pass.h"
#include "runtime/executable.h"
#include "support/target.h"

namespace fj {

struct CompileOptions {
  int opt_level = 2;          // LLVM optimisation level
  int vector_width = 0;       // CPU SIMD lanes (0: the host's, cpu::HostVectorLanes)
  bool simplify = true;       // DCE, CSE, algebraic simplification, constant folding
  bool keep_llvm_ir = false;  // record the optimised LLVM IR (and the native assembly)
  std::string fusion_profile = "fusionjit";  // see fusion/profile.h
  Backend backend = Backend::kCpu;
  std::string gpu_arch;       // PTX target ("" : the GPU's, else sm_80)
  int ptx_version = 0;        // PTX ISA version (0: the lowest that has the target)
  bool keep_ptx = false;      // gpu_emulated: also generate the PTX (the GPU always does)
  bool profile = false;       // CPU: time every kernel launch (Executable::Profile)
};

struct Compilation {
  std::unique_ptr<Module> optimized;  // after the passes and kernel formation
  std::shared_ptr<Executable> executable;
  std::string llvm_ir;
  std::string assembly;
  std::string ptx;  // the GPU's kernels
  std::vector<PassRecord> passes;
  std::string buffer_assignment;
  std::unique_ptr<Module> before_fusion;  // the module the kept fusion plan was built from
  FusionLog fusion_log;
  Target target;  // what it was compiled for (explain's cost figures)
  double seconds_passes = 0, seconds_codegen = 0;
  bool code_cache_hit = false;  // the executable was generated before (compiler/code_cache.h)
};

// Verifies `module` (a copy is compiled; the argument is unchanged).
std::unique_ptr<Compilation> Compile(const Module& module, const CompileOptions& options);

// Runs the optimisation passes only (the "optimized" stage, before kernel formation).
std::vector<PassRecord> RunOptimizationPasses(Module& module, const CompileOptions& options);

}  // namespace fj
