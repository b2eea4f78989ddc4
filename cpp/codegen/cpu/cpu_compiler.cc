// CPU program generation (see cpu_compiler.h).
#include "codegen/cpu/cpu_compiler.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <unordered_map>


#include "codegen/cpu/jit.h"
#include "analysis/cost_model.h"
#include "codegen/kernel_emitter.h"
#include "codegen/program_emitter.h"
#include "codegen/whole_loop_emitter.h"
#include "llvm/Analysis/TargetTransformInfo.h"
#include "llvm/TargetParser/Host.h"
#include "runtime/host_callback.h"
#include "support/error.h"
#include "support/flags.h"

namespace fj::cpu {
namespace {

using codegen::Builder;
using codegen::ProgramEmitter;

// The CPU's program: kernels called directly, or through the thread pool when they are
// large; custom calls through their address in the runtime.
class CpuProgramEmitter : public codegen::ProgramEmitter {
 public:
  CpuProgramEmitter(llvm::Module& module, const BufferAssignment& buffers, const CpuOptions& options,
                    std::atomic<int64_t>* profile, int64_t profile_slots)
      : ProgramEmitter(module, buffers), options_(options), profile_(profile), profile_slots_(profile_slots) {}

 private:
  // Calls kernel number `number` (Timed).
  void CallKernel(llvm::Value* kernel, llvm::Value* table, int64_t units, bool parallel, int64_t grain, int number) {
    Builder& b = *b_;
    Timed(number, [&] {
      if (parallel) {
        llvm::Value* rt = fn_->getArg(3);
        llvm::Value* parallel_for = b.CreateLoad(ptr_, rt);
        llvm::Value* pool = b.CreateLoad(ptr_, b.CreateConstGEP1_64(ptr_, rt, 1));
        auto* pf_type = llvm::FunctionType::get(
            llvm::Type::getVoidTy(ctx_), {ptr_, ptr_, ptr_, b.getInt64Ty(), b.getInt64Ty()}, false);
        b.CreateCall(pf_type, parallel_for, {pool, kernel, table, b.getInt64(units), b.getInt64(grain)});
      } else {
        auto* k_type = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx_), {ptr_, b.getInt64Ty(), b.getInt64Ty()}, false);
        b.CreateCall(k_type, kernel, {table, b.getInt64(0), b.getInt64(units)});
      }
    });
  }

  // Emits what `emit` emits; profiled, between two clock reads whose difference it adds to
  // kernel `number`'s counters.
  void Timed(int number, const std::function<void()>& emit) {
    Builder& b = *b_;
    llvm::Value* start = profile_ ? ReadClock() : nullptr;
    emit();
    if (!profile_) return;
    FJ_CHECK(number < profile_slots_, "kernel ", number, " has no profile counters (", profile_slots_, ")");
    llvm::Value* elapsed = b.CreateSub(ReadClock(), start);
    auto add = [&](int64_t slot, llvm::Value* v) {
      llvm::Value* at = llvm::ConstantExpr::getIntToPtr(
          b.getInt64(static_cast<int64_t>(reinterpret_cast<uintptr_t>(&profile_[slot]))), ptr_);
      b.CreateAtomicRMW(llvm::AtomicRMWInst::Add, at, v, llvm::MaybeAlign(8), llvm::AtomicOrdering::Monotonic);
    };
    add(2 * int64_t{number}, elapsed);
    add(2 * int64_t{number} + 1, b.getInt64(1));
  }

  // A host callback (runtime/host_callback.h): the runtime's entry, on the program's thread,
  // with the call's buffers.
  KernelInfo EmitHostCallback(const Instruction* call, int64_t id, int number) {
    const Shape& shape = call->shape();
    int num_outputs = shape.IsTuple() ? static_cast<int>(shape.tuple_shapes().size()) : 1;
    KernelInfo info = Describe(call, "host-callback", "custom-call");
    info.units = 1;
    llvm::Value* table = BufferTable(call, num_outputs);
    auto* type = llvm::FunctionType::get(b_->getVoidTy(), {b_->getInt64Ty(), ptr_}, false);
    llvm::Value* entry = llvm::ConstantExpr::getIntToPtr(
        b_->getInt64(static_cast<int64_t>(reinterpret_cast<uintptr_t>(&FjRunHostCallback))), ptr_);
    Timed(number, [&] { b_->CreateCall(type, entry, {b_->getInt64(id), table}); });
    return info;
  }

  llvm::Value* ReadClock() {
    auto* type = llvm::FunctionType::get(b_->getInt64Ty(), false);
    llvm::Value* clock = llvm::ConstantExpr::getIntToPtr(
        b_->getInt64(static_cast<int64_t>(reinterpret_cast<uintptr_t>(&ProfileClock))), ptr_);
    return b_->CreateCall(type, clock, {});
  }

  static int64_t ProfileClock() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  // A custom call: an opaque kernel of the runtime, called through its address.
  KernelInfo EmitCustomCall(const Instruction* call, int number) override {
    const std::string& target = call->attrs().custom_call_target;
    if (int64_t id = HostCallbackId(target); id >= 0) return EmitHostCallback(call, id, number);
    bool may_split = false;
    FjKernelFn fn = options_.resolve_custom_call ? options_.resolve_custom_call(target, &may_split) : nullptr;
    if (!fn) ThrowUnimplemented("unknown custom-call target '", target, "'");
    const Shape& shape = call->shape();
    int num_outputs = shape.IsTuple() ? static_cast<int>(shape.tuple_shapes().size()) : 1;
    int64_t units = shape.IsTuple() ? shape.tuple_shape(0).NumElements() : shape.NumElements();
    KernelInfo info = Describe(call, "custom-call." + target, "custom-call");
    info.units = units;
    if (units == 0) return info;
    llvm::Value* table = BufferTable(call, num_outputs);
    llvm::Value* address = llvm::ConstantExpr::getIntToPtr(
        b_->getInt64(static_cast<int64_t>(reinterpret_cast<uintptr_t>(fn))), ptr_);
    // Its work counts the operands' elements too (EstimateKernel): top_k's few outputs per
    // long row are much work. A chunk reads about 1024 units' worth of the largest operand.
    KernelCost cost = EstimateKernel(call);
    info.parallel = may_split && units > 1 && RunsInParallel(cost, options_.target);
    int64_t read = units;
    for (const Instruction* op : call->operands()) {
      if (op->shape().IsArray()) read = std::max(read, op->shape().NumElements());
    }
    info.grain = std::max<int64_t>(1, 1024 * units / read);
    CallKernel(address, table, units, info.parallel, info.grain, number);
    return info;
  }

  KernelInfo EmitKernelCall(const Instruction* fusion, int number) override {
    bool in_place = buffers_.WritesInPlace(fusion);
    codegen::KernelPlan plan = codegen::PlanKernel(fusion, options_.vector_width, in_place);
    plan.native_half = HostConvertsHalf();
    // The grain below rounds chunks of element units to whole vectors.
    plan.whole_vector_chunks = plan.mode == codegen::KernelPlan::Mode::kFlat ||
                               plan.mode == codegen::KernelPlan::Mode::kLinear1D;
    std::string name = "kernel." + std::to_string(number) + "." + fusion->name();
    // Kernels that compute alike (an unrolled loop's copies of one step's kernels, one op
    // on one shape in several places) are one function: LLVM compiles each once.
    llvm::Function*& kernel = generated_[codegen::KernelKey(fusion, in_place)];
    if (!kernel) kernel = codegen::EmitKernel(module_, fusion, plan, name, in_place);

    KernelInfo info = Describe(fusion, name, std::string(FusionKindName(fusion->fusion_kind())));
    info.units = plan.units;
    info.width = plan.width;
    if (plan.units == 0) return info;

    llvm::Value* table = BufferTable(fusion, plan.num_outputs);
    // The kernel's work (the most element evaluations any of its ops makes, in all steps of
    // a whole loop) and arithmetic, as the cost model counts them: it runs in parallel where
    // the model expects it to.
    KernelCost cost = EstimateKernel(fusion);
    if (plan.mode == codegen::KernelPlan::Mode::kScatter) cost.work = static_cast<double>(plan.work);
    info.parallel = plan.units > 1 && RunsInParallel(cost, options_.target);
    int64_t work_per_unit = std::max<int64_t>(1, static_cast<int64_t>(cost.work) / plan.units);
    int64_t grain = std::max<int64_t>(1, 16384 / work_per_unit);
    // Units that are elements go to threads in whole vectors: a chunk that starts or ends
    // mid-vector runs its elements on the scalar tail loop.
    if (plan.mode != codegen::KernelPlan::Mode::kRows) grain = (grain + plan.width - 1) / plan.width * plan.width;
    if (plan.mode == codegen::KernelPlan::Mode::kWholeLoop) {
      // Each lane runs every step: all the work is in the units. Threads take whole groups
      // of vectors, and with per-step reductions whole blocks of lanes (each block's
      // partial sums are its own).
      grain = codegen::PlanWholeLoopVectors(fusion, plan.width).span;
    }
    grain = std::max(grain, plan.dot_tile.chunk_rows);
    // Tiled rows go to threads in whole tiles (a chunk's rows short of a tile walk plain).
    if (plan.tile_rows > 1) grain = (grain + plan.tile_rows - 1) / plan.tile_rows * plan.tile_rows;
    FJ_CHECK(!plan.whole_vector_chunks || grain % plan.width == 0, "kernel ", name, " was emitted without a scalar tail but ",
             "its chunks of ", grain, " units are not whole vectors of ", plan.width);
    info.grain = grain;
    CallKernel(kernel, table, plan.units, info.parallel, grain, number);
    return info;
  }

  const CpuOptions& options_;
  std::atomic<int64_t>* profile_;  // null unless profiled
  int64_t profile_slots_;          // kernels the counters have room for
  std::unordered_map<std::string, llvm::Function*> generated_;  // by what they compute
};

// The kernels ProgramEmitter numbers in `c`: one per fusion or custom call, and those of
// the loops' and branches' computations wherever they are called.
int64_t LaunchSites(const Computation& c) {
  int64_t n = 0;
  for (const Instruction* i : c.MakePostOrder()) {
    if (i->opcode() == Opcode::kFusion || i->opcode() == Opcode::kCustomCall) {
      ++n;
    } else if (i->opcode() == Opcode::kWhile) {
      n += LaunchSites(*i->while_condition()) + LaunchSites(*i->while_body());
    } else if (i->opcode() == Opcode::kConditional) {
      for (const Computation* branch : i->called_computations()) n += LaunchSites(*branch);
    }
  }
  return n;
}

}  // namespace

CpuProgram CompileCpuProgram(const Module& module, const BufferAssignment& buffers,
                             const CpuOptions& options) {
  JitEngine& jit = JitEngine::Get();
  auto context = std::make_unique<llvm::LLVMContext>();
  auto llvm_module = std::make_unique<llvm::Module>(module.name(), *context);
  // The host's triple from the start: the emitters ask what target they emit for.
  llvm_module->setTargetTriple(jit.target_machine().getTargetTriple().str());
  CpuProgram program;
  int64_t launch_sites = 0;  // the kernels the program emitter will number
  if (options.profile) {
    launch_sites = LaunchSites(*module.entry());
    program.profile.reset(new std::atomic<int64_t>[2 * launch_sites + 2]());
  }
  CpuProgramEmitter emitter(*llvm_module, buffers, options, program.profile.get(), launch_sites);
  program.kernels = emitter.Emit(*module.entry());
  program.loops = emitter.loops();
  bool want_ir = options.keep_llvm_ir || GetDebugFlags().debug_level >= 3;
  std::string ir, assembly;
  auto [entry, code] = jit.Add(std::move(llvm_module), std::move(context), "fj_main",
                               options.opt_level, want_ir ? &ir : nullptr,
                               options.keep_asm ? &assembly : nullptr);
  program.entry = reinterpret_cast<FjEntryFn>(entry);
  program.code = std::move(code);
  program.llvm_ir = std::move(ir);
  program.assembly = std::move(assembly);
  return program;
}

std::string HostCpuDescription() {
  JitEngine& jit = JitEngine::Get();
  return jit.target_machine().getTargetCPU().str();
}

bool HostConvertsHalf() {
  static const bool f16c = [] {
    if (const char* off = std::getenv("FJ_NO_NATIVE_HALF"); off && *off && *off != '0') return false;
    std::string features = JitEngine::Get().target_machine().getTargetFeatureString().str();
    return features.find("+f16c") != std::string::npos;
  }();
  return f16c;
}

int HostVectorLanes() {
  // LLVM's own choice for this CPU: 512-bit registers where AVX-512 runs at full speed,
  // 256 where it is absent or LLVM's tuning prefers 256-bit vectors (it downclocks).
  static const int lanes = [] {
    llvm::LLVMContext ctx;
    llvm::Module m("probe", ctx);
    llvm::Function* f = llvm::Function::Create(llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), false),
                                               llvm::Function::ExternalLinkage, "probe", m);
    llvm::TargetTransformInfo tti = JitEngine::Get().target_machine().getTargetTransformInfo(*f);
    int64_t bits = static_cast<int64_t>(
        tti.getRegisterBitWidth(llvm::TargetTransformInfo::RGK_FixedWidthVector).getFixedValue());
    return static_cast<int>(std::clamp<int64_t>(bits / 32, 4, 16));
  }();
  return lanes;
}

int HostVectorUnitLanes() {
  return HostCpuDescription() == "znver4" ? std::min(HostVectorLanes(), 8) : HostVectorLanes();
}

}  // namespace fj::cpu
