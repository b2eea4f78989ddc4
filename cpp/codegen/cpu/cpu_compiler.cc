// CPU program generation (see cpu_compiler.h).
#include "codegen/cpu/cpu_compiler.h"

#include "codegen/cpu/jit.h"
#include "codegen/kernel_emitter.h"
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
      if (instr->opcode() != Opcode::kFusion) continue;
      kernels.push_back(EmitKernelCall(instr, kernel_number++));
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

  KernelInfo EmitKernelCall(const Instruction* fusion, int number) {
    codegen::KernelPlan plan = codegen::PlanKernel(fusion, options_.vector_width);
    std::string name = "kernel." + std::to_string(number) + "." + fusion->name();
    llvm::Function* kernel = codegen::EmitKernel(module_, fusion, plan, name);

    KernelInfo info;
    info.name = name;
    info.fusion = fusion->name();
    info.kind = std::string(FusionKindName(fusion->fusion_kind()));
    info.units = plan.units;
    for (const Instruction* op : fusion->operands()) info.bytes_read += op->shape().ByteSize();
    info.bytes_written = fusion->shape().ByteSize();
    if (plan.units == 0) return info;

    // The buffer table lives in the entry block's frame.
    int num_outputs = plan.num_outputs;
    int n = num_outputs + fusion->operand_count();
    Builder& b = *b_;
    llvm::IRBuilderBase::InsertPoint ip = b.saveIP();
    b.SetInsertPoint(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
    llvm::Value* table = b.CreateAlloca(llvm::ArrayType::get(ptr_, n));
    b.restoreIP(ip);
    for (int k = 0; k < num_outputs; ++k) {
      b.CreateStore(SlicePointer(buffers_.Get(fusion, k)), b.CreateConstGEP1_64(ptr_, table, k));
    }
    for (int k = 0; k < fusion->operand_count(); ++k) {
      b.CreateStore(SlicePointer(buffers_.Get(fusion->operand(k))),
                    b.CreateConstGEP1_64(ptr_, table, num_outputs + k));
    }
    int64_t elements = fusion->shape().IsTuple() ? fusion->shape().tuple_shape(0).NumElements()
                                                 : fusion->shape().NumElements();
    int64_t per_unit = std::max<int64_t>(1, elements / plan.units);
    // Reductions do more work per output element than their output size suggests.
    int64_t work = 0;
    for (const Instruction* op : fusion->operands()) work = std::max(work, op->shape().NumElements());
    work = std::max(work, elements);
    info.parallel = work >= options_.parallel_min_elements && plan.units > 1;
    if (info.parallel) {
      int64_t work_per_unit = std::max<int64_t>(1, work / plan.units);
      int64_t grain = std::max<int64_t>(1, 16384 / work_per_unit);
      (void)per_unit;
      llvm::Value* rt = fn_->getArg(3);
      llvm::Value* parallel_for = b.CreateLoad(ptr_, rt);
      llvm::Value* pool = b.CreateLoad(ptr_, b.CreateConstGEP1_64(ptr_, rt, 1));
      auto* pf_type = llvm::FunctionType::get(
          llvm::Type::getVoidTy(ctx_), {ptr_, ptr_, ptr_, b.getInt64Ty(), b.getInt64Ty()}, false);
      b.CreateCall(pf_type, parallel_for, {pool, kernel, table, b.getInt64(plan.units), b.getInt64(grain)});
    } else {
      b.CreateCall(kernel, {table, b.getInt64(0), b.getInt64(plan.units)});
    }
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

}  // namespace fj::cpu
