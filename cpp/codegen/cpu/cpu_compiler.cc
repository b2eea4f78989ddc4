// CPU program generation (see cpu_compiler.h).
#include "codegen/cpu/cpu_compiler.h"

#include <algorithm>


#include "codegen/cpu/jit.h"
#include "codegen/kernel_emitter.h"
#include "llvm/Analysis/TargetTransformInfo.h"
#include "llvm/TargetParser/Host.h"
#include "support/error.h"
#include "support/flags.h"

namespace fj::cpu {
namespace {

using codegen::Builder;

// Emits the entry function: pointers for each kernel's buffers, then the calls.
class ProgramEmitter {
 public:
  ProgramEmitter(llvm::Module& module, const BufferAssignment& buffers, const CpuOptions& options)
      : module_(module), ctx_(module.getContext()), buffers_(buffers), options_(options),
        ptr_(llvm::PointerType::getUnqual(ctx_)) {}

  std::vector<KernelInfo> Emit(const Computation& entry) {
    auto* fn_type = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx_), {ptr_, ptr_, ptr_, ptr_}, false);
    fn_ = llvm::Function::Create(fn_type, llvm::GlobalValue::ExternalLinkage, "fj_main", module_);
    fn_->addFnAttr(llvm::Attribute::NoUnwind);
    llvm::BasicBlock* entry_bb = llvm::BasicBlock::Create(ctx_, "entry", fn_);
    Builder b(entry_bb);
    b_ = &b;
    std::vector<KernelInfo> kernels;
    int kernel_number = 0;
    for (const Instruction* instr : buffers_.schedule()) {
      if (instr->opcode() == Opcode::kFusion) {
        kernels.push_back(EmitKernelCall(instr, kernel_number++));
      } else if (instr->opcode() == Opcode::kCustomCall) {
        kernels.push_back(EmitCustomCall(instr));
      }
    }
    for (const BufferAssignment::OutputCopy& copy : buffers_.output_copies()) {
      llvm::Value* dst = LoadPointer(fn_->getArg(1), copy.output);
      llvm::Value* src = SlicePointer(copy.source);
      b.CreateMemCpy(dst, llvm::MaybeAlign(16), src, llvm::MaybeAlign(16), copy.source.size);
    }
    b.CreateRetVoid();
    return kernels;
  }

 private:
  llvm::Value* LoadPointer(llvm::Value* table, int64_t i) {
    return b_->CreateLoad(ptr_, b_->CreateConstGEP1_64(ptr_, table, i));
  }

  llvm::Value* SlicePointer(const BufferSlice& s) {
    switch (s.kind) {
      case BufferKind::kParameter: return LoadPointer(fn_->getArg(0), s.index);
      case BufferKind::kOutput: return LoadPointer(fn_->getArg(1), s.index);
      case BufferKind::kTemp: return b_->CreateConstGEP1_64(b_->getInt8Ty(), fn_->getArg(2), s.offset);
      case BufferKind::kConstant: return codegen::ConstantGlobal(module_, s.constant);
    }
    return nullptr;
  }

  // Fills a stack table with the buffers of `instr`'s outputs, then its operands.
  llvm::Value* BufferTable(const Instruction* instr, int num_outputs) {
    Builder& b = *b_;
    int n = num_outputs + instr->operand_count();
    llvm::IRBuilderBase::InsertPoint ip = b.saveIP();
    b.SetInsertPoint(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
    llvm::Value* table = b.CreateAlloca(llvm::ArrayType::get(ptr_, n));
    b.restoreIP(ip);
    for (int k = 0; k < num_outputs; ++k) {
      b.CreateStore(SlicePointer(buffers_.Get(instr, k)), b.CreateConstGEP1_64(ptr_, table, k));
    }
    for (int k = 0; k < instr->operand_count(); ++k) {
      b.CreateStore(SlicePointer(buffers_.Get(instr->operand(k))),
                    b.CreateConstGEP1_64(ptr_, table, num_outputs + k));
    }
    return table;
  }

  void CallKernel(llvm::Value* kernel, llvm::Value* table, int64_t units, bool parallel, int64_t grain) {
    Builder& b = *b_;
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
  }

  // A custom call: an opaque kernel of the runtime, called through its address.
  KernelInfo EmitCustomCall(const Instruction* call) {
    const std::string& target = call->attrs().custom_call_target;
    bool may_split = false;
    FjKernelFn fn = options_.resolve_custom_call ? options_.resolve_custom_call(target, &may_split) : nullptr;
    if (!fn) ThrowUnimplemented("unknown custom-call target '", target, "'");
    const Shape& shape = call->shape();
    int num_outputs = shape.IsTuple() ? static_cast<int>(shape.tuple_shapes().size()) : 1;
    int64_t units = shape.IsTuple() ? shape.tuple_shape(0).NumElements() : shape.NumElements();
    KernelInfo info;
    info.name = "custom-call." + target;
    info.fusion = call->name();
    info.kind = "custom-call";
    info.units = units;
    for (const Instruction* op : call->operands()) info.bytes_read += op->shape().ByteSize();
    info.bytes_written = shape.ByteSize();
    if (units == 0) return info;
    llvm::Value* table = BufferTable(call, num_outputs);
    llvm::Value* address = llvm::ConstantExpr::getIntToPtr(
        b_->getInt64(static_cast<int64_t>(reinterpret_cast<uintptr_t>(fn))), ptr_);
    info.parallel = may_split && units >= options_.parallel_min_elements;
    info.grain = 16384 / 16;
    CallKernel(address, table, units, info.parallel, info.grain);
    return info;
  }

  KernelInfo EmitKernelCall(const Instruction* fusion, int number) {
    codegen::KernelPlan plan = codegen::PlanKernel(fusion, options_.vector_width);
    std::string name = "kernel." + std::to_string(number) + "." + fusion->name();
    llvm::Function* kernel = codegen::EmitKernel(module_, fusion, plan, name);

    KernelInfo info;
    info.name = name;
    info.fusion = fusion->name();
    info.kind = std::string(FusionKindName(fusion->fusion_kind()));
    info.units = plan.units;
    info.width = plan.width;
    for (const Instruction* op : fusion->operands()) info.bytes_read += op->shape().ByteSize();
    info.bytes_written = fusion->shape().ByteSize();
    if (plan.units == 0) return info;

    llvm::Value* table = BufferTable(fusion, plan.num_outputs);
    int64_t elements = fusion->shape().IsTuple() ? fusion->shape().tuple_shape(0).NumElements()
                                                 : fusion->shape().NumElements();
    // Reductions do more work per output element than their output size suggests, also
    // over values the kernel makes itself (an iota, random bits, a broadcast scalar).
    int64_t work = elements;
    for (const Instruction* op : fusion->operands()) work = std::max(work, op->shape().NumElements());
    for (const Instruction* i : fusion->fused_computation()->MakePostOrder()) {
      if (i->shape().IsArray()) work = std::max(work, i->shape().NumElements());
    }
    info.parallel = work >= options_.parallel_min_elements && plan.units > 1;
    int64_t work_per_unit = std::max<int64_t>(1, work / std::max<int64_t>(plan.units, 1));
    int64_t grain = std::max<int64_t>(1, 16384 / work_per_unit);
    // Units that are elements go to threads in whole vectors: a chunk that starts or ends
    // mid-vector runs its elements on the scalar tail loop.
    if (plan.mode != codegen::KernelPlan::Mode::kRows) grain = (grain + plan.width - 1) / plan.width * plan.width;
    info.grain = grain;
    CallKernel(kernel, table, plan.units, info.parallel, grain);
    return info;
  }

  llvm::Module& module_;
  llvm::LLVMContext& ctx_;
  const BufferAssignment& buffers_;
  const CpuOptions& options_;
  llvm::PointerType* ptr_;
  llvm::Function* fn_ = nullptr;
  Builder* b_ = nullptr;
};

}  // namespace

CpuProgram CompileCpuProgram(const Module& module, const BufferAssignment& buffers,
                             const CpuOptions& options) {
  JitEngine& jit = JitEngine::Get();
  auto context = std::make_unique<llvm::LLVMContext>();
  auto llvm_module = std::make_unique<llvm::Module>(module.name(), *context);
  CpuProgram program;
  program.kernels = ProgramEmitter(*llvm_module, buffers, options).Emit(*module.entry());
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

}  // namespace fj::cpu
