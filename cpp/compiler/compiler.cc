// The compiler driver (see compiler.h).
#include "compiler/compiler.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "analysis/buffer_assignment.h"
#include "codegen/cpu/cpu_compiler.h"
#include "codegen/gpu/gpu_compiler.h"
#include "compiler/code_cache.h"
#include "fusion/fusion_pipeline.h"
#include "fusion/profile.h"
#include "ir/dot_printer.h"
#include "ir/verifier.h"
#include "passes/carry_split.h"
#include "passes/concat_forwarding.h"
#include "passes/constant_folding.h"
#include "passes/custom_call_expansion.h"
#include "passes/cse.h"
#include "passes/dce.h"
#include "passes/loop_invariant_layout.h"
#include "passes/loop_output_reduction.h"
#include "passes/low_precision.h"
#include "passes/simplify.h"
#include "passes/while_loop.h"
#include "runtime/custom_calls.h"
#include "runtime/host_callback.h"
#include "support/error.h"
#include "support/flags.h"

namespace fj {
namespace {

double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The PTX target when the options name none: the GPU's own where one is there (capped at
// what this LLVM emits: newer GPUs run older targets' PTX), else sm_80.
std::string DefaultGpuArch(Backend backend) {
  if (backend != Backend::kGpu || !GpuUnavailableReason().empty()) return "sm_80";
  std::string arch = GetGpuDevice(backend)->Arch();
  std::string max = gpu::MaxGpuArch();
  return std::atoi(arch.c_str() + 3) > std::atoi(max.c_str() + 3) ? max : arch;
}

// What CPU code generation depends on: the kernel module (its text prints every attribute:
// it round-trips through the parser) and the options code generation reads. Constants of
// more than CodeCache::kInlineLiteralBytes are written as their hash and returned in
// `literals` (printing megabytes of closed-over weights would cost more than it saves).
std::string CodeKey(const Module& module, const cpu::CpuOptions& o,
                    std::vector<std::shared_ptr<const Literal>>& literals) {
  LiteralText text = [&](const std::shared_ptr<const Literal>& lit) {
    if (lit->byte_size() <= CodeCache::kInlineLiteralBytes) return lit->ToString();
    literals.push_back(lit);
    return StrCat("literal#", literals.size() - 1, ":", lit->Hash());
  };
  return StrCat(module.ToString(&text), "\n# cpu opt_level=", o.opt_level, " lanes=", o.vector_width,
                " keep_llvm_ir=", o.keep_llvm_ir, " keep_asm=", o.keep_asm, " profile=", o.profile);
}

// The host callbacks `module` calls, held by its executable for as long as it lives.
std::vector<std::shared_ptr<const void>> HeldHostCallbacks(const Module& module) {
  std::vector<std::shared_ptr<const void>> held;
  for (const Computation* c : module.computations()) {
    for (const Instruction* i : c->Instructions()) {
      if (i->opcode() != Opcode::kCustomCall) continue;
      int64_t id = HostCallbackId(i->attrs().custom_call_target);
      if (id < 0) continue;
      std::shared_ptr<const HostCallback> callback = FindHostCallback(id);
      if (!callback) ThrowInternal("host callback ", id, " of %", i->name(), " was freed before its program compiled");
      held.push_back(std::move(callback));
    }
  }
  return held;
}

}  // namespace

std::vector<PassRecord> RunOptimizationPasses(Module& module, const CompileOptions& options) {
  // First, and under every option: nothing after it computes on 16-bit floats.
  Pipeline normalize("normalization");
  normalize.AddPass<LowPrecisionPass>();
  normalize.Run(module);
  std::vector<PassRecord> records = normalize.records();
  Pipeline simplify("simplification");
  if (options.simplify) {
    simplify.AddPass<SimplifyPass>();
    simplify.AddPass<ConstantFoldingPass>();
    simplify.AddPass<CsePass>();
    simplify.AddPass<DcePass>();
    simplify.set_fixed_point(8);
  } else {
    simplify.AddPass<DcePass>();
  }
  simplify.Run(module);
  for (const PassRecord& r : simplify.records()) records.push_back(r);
  if (options.simplify) {
    // Loops: trip counts, forwarding and dead carries; then simplification again over what
    // forwarding exposed. (Unrolling belongs to each fusion plan: a loop that runs as one
    // kernel is not unrolled.)
    Pipeline loops("loops");
    loops.AddPass<WhileTripCountPass>();
    loops.AddPass<WhileLoopSimplifyPass>();
    loops.AddPass<SimplifyPass>();
    loops.AddPass<ConstantFoldingPass>();
    loops.AddPass<CsePass>();
    loops.AddPass<DcePass>();
    loops.set_fixed_point(8);
    loops.Run(module);
    for (const PassRecord& r : loops.records()) records.push_back(r);
  }
  return records;
}

std::unique_ptr<Compilation> Compile(const Module& traced, const CompileOptions& options) {
  auto result = std::make_unique<Compilation>();
  VerifyModule(traced);
  auto start = std::chrono::steady_clock::now();
  std::unique_ptr<Module> module = traced.Clone();
  // Donated buffers are taken over on the CPU only (the GPU's arguments are copies cached
  // in their host buffers): elsewhere a program leaves its arguments as they are.
  if (options.backend != Backend::kCpu) module->set_donated_parameters({});
  if (!GetDebugFlags().dump_dir.empty() || GetDebugFlags().debug_level >= 2) {
    DumpStage(*module, "traced", "fjir", module->ToString());
    DebugPrint(2, module->name() + " as traced", module->ToString());
  }
  result->passes = RunOptimizationPasses(*module, options);

  FusionProfile profile = GetFusionProfile(options.fusion_profile);
  std::unique_ptr<Module> unrepaired;
  if (profile.frontend_repair) {
    unrepaired = module->Clone();  // what XLA's rules would see, for the plan selection
    Pipeline repair("frontend-repair");
    repair.AddPass<LoopCarrySplitPass>();
    repair.AddPass<LoopOutputReductionPass>();
    repair.AddPass<LoopInvariantLayoutPass>();
    repair.AddPass<WhileLoopSimplifyPass>();
    repair.AddPass<SliceOfConcatForwardingPass>();
    repair.AddPass<SliceSinkingPass>();
    repair.AddPass<SimplifyPass>();
    repair.AddPass<CsePass>();
    repair.AddPass<DcePass>();
    repair.set_fixed_point(8);
    repair.Run(*module);
    for (const PassRecord& r : repair.records()) result->passes.push_back(r);
  }
  int cpu_lanes = options.vector_width > 0 ? options.vector_width : cpu::HostVectorLanes();
  Target target = Target::For(options.backend, cpu_lanes, std::min(cpu_lanes, cpu::HostVectorUnitLanes()));
  result->target = target;
  FusionPlan plan = FormKernels(*module, profile, target, unrepaired.get());
  result->before_fusion = std::move(plan.before);
  module = std::move(plan.module);
  result->fusion_log = std::move(plan.log);
  for (const PassRecord& r : plan.records) result->passes.push_back(r);
  if (target.is_gpu()) {
    // The GPU cannot call the runtime's C++ kernels: custom calls that IR can express
    // become kernels of their own.
    Pipeline gpu("gpu-lowering");
    gpu.AddPass<CustomCallExpansionPass>();
    gpu.Run(*module);
    for (const PassRecord& r : gpu.records()) result->passes.push_back(r);
  }
  if (GetDebugFlags().checks) VerifyModule(*module);
  if (!GetDebugFlags().dump_dir.empty()) DumpStage(*module, "kernels", "dot", ModuleToDot(*module));
  if (GetDebugFlags().debug_level >= 2) {  // (the text costs as much as LLVM for large constants)
    DebugPrint(2, module->name() + " kernels (after fusion)", module->ToString());
  }
  result->seconds_passes = Since(start);

  start = std::chrono::steady_clock::now();
  BufferAssignment buffers(*module);
  result->buffer_assignment = buffers.ToString();
  std::vector<Shape> params;
  for (const Instruction* p : module->entry()->parameters()) params.push_back(p->shape());
  std::vector<Shape> outputs;
  for (int i = 0; i < buffers.num_outputs(); ++i) outputs.push_back(buffers.output_shape(i));
  if (target.is_gpu()) {
    gpu::GpuOptions gpu_options;
    gpu_options.emulated = options.backend == Backend::kGpuEmulated;
    gpu_options.want_ptx = !gpu_options.emulated || options.keep_ptx;
    gpu_options.opt_level = std::max(options.opt_level, 1);
    gpu_options.keep_llvm_ir = options.keep_llvm_ir;
    gpu_options.arch = options.gpu_arch.empty() ? DefaultGpuArch(options.backend) : options.gpu_arch;
    gpu_options.ptx_version = options.ptx_version;
    gpu_options.resolve_custom_call = [](const std::string& target) -> FjKernelFn {
      const CustomCall* call = FindCustomCall(target);
      return call ? call->fn : nullptr;
    };
    gpu::GpuCompiled program = gpu::CompileGpuProgram(*module, buffers, gpu_options);
    result->llvm_ir = program.llvm_ir;
    result->ptx = program.ptx;
    if (!program.ptx.empty()) DumpStage(*module, "ptx", "ptx", program.ptx);
    if (!program.llvm_ir.empty()) DebugPrint(3, module->name() + " LLVM IR (optimised)", program.llvm_ir);
    result->executable = std::make_shared<GpuExecutable>(options.backend, std::move(program.program), params, outputs,
                                                         buffers.temp_bytes(), program.kernels, program.loops);
  } else {
    cpu::CpuOptions cpu_options;
    cpu_options.opt_level = options.opt_level;
    cpu_options.vector_width = cpu_lanes;
    cpu_options.target = target;
    cpu_options.keep_llvm_ir = options.keep_llvm_ir;
    cpu_options.keep_asm = options.keep_llvm_ir;
    cpu_options.profile = options.profile;
    cpu_options.resolve_custom_call = [](const std::string& target, bool* parallel) -> FjKernelFn {
      const CustomCall* call = FindCustomCall(target);
      if (parallel) *parallel = call && call->parallel;
      return call ? call->fn : nullptr;
    };
    std::vector<std::shared_ptr<const Literal>> literals;
    std::string key = CodeKey(*module, cpu_options, literals);
    std::optional<CodeCache::Entry> cached = CodeCache::Get().Find(key, literals);
    if (cached) {
      result->executable = cached->executable;
      result->llvm_ir = cached->llvm_ir;
      result->assembly = cached->assembly;
    } else {
      cpu::CpuProgram program = cpu::CompileCpuProgram(*module, buffers, cpu_options);
      result->llvm_ir = program.llvm_ir;
      result->assembly = program.assembly;
      result->executable = std::make_shared<CpuExecutable>(program.entry, program.code, params, outputs,
                                                           buffers.temp_bytes(), program.kernels, program.loops,
                                                           std::move(program.profile));
      std::vector<std::shared_ptr<const void>> callbacks = HeldHostCallbacks(*module);
      const bool shareable = callbacks.empty();
      result->executable->set_keep_alive(std::move(callbacks));
      // (None for a program that takes no donation: its calls skip the donation step.)
      const std::vector<OutputAlias>& aliases = buffers.output_aliases();
      if (std::any_of(aliases.begin(), aliases.end(), [](const OutputAlias& a) { return a.parameter >= 0; })) {
        result->executable->set_output_aliases(aliases);
      }
      // (A program that calls host callbacks is its trace's alone, and the cache would keep
      // them alive.)
      if (shareable) {
        CodeCache::Get().Insert(key, {result->executable, result->llvm_ir, result->assembly, std::move(literals)});
      }
    }
    if (!result->llvm_ir.empty()) {
      DumpStage(*module, "llvm", "ll", result->llvm_ir);
      DebugPrint(3, module->name() + " LLVM IR (optimised)", result->llvm_ir);
    }
    result->code_cache_hit = cached.has_value();
  }
  result->seconds_codegen = Since(start);
  if (GetDebugFlags().debug_level >= 1) {
    std::fprintf(stderr, "[fusionjit] %s: passes %.1f ms, codegen (LLVM, %s) %.1f ms%s, %zu kernels\n",
                 module->name().c_str(), result->seconds_passes * 1e3, target.is_gpu() ? "gpu" : "cpu",
                 result->seconds_codegen * 1e3, result->code_cache_hit ? " (code cache hit)" : "",
                 result->executable->kernels().size());
  }
  result->optimized = std::move(module);
  return result;
}

}  // namespace fj
