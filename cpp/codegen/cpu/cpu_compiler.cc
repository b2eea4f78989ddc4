// CPU program generation (see cpu_compiler.h).
#include "codegen/cpu/cpu_compiler.h"

#include <algorithm>


#include "codegen/cpu/jit.h"
#include "analysis/cost_model.h"
#include "codegen/kernel_emitter.h"
#include "ir/whole_loop.h"
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
    EmitComputation(entry);
    EmitCopies(buffers_.output_copies());
    b.CreateRetVoid();
    // Every loop's iteration counter starts at zero in each call.
    b.SetInsertPoint(entry_bb, entry_bb->getFirstInsertionPt());
    for (const LoopInfo& loop : loops_) {
      b.CreateStore(b.getInt64(0), b.CreateConstGEP1_64(b.getInt8Ty(), fn_->getArg(2), loop.counter_offset));
    }
    return std::move(kernels_);
  }

  const std::vector<LoopInfo>& loops() const { return loops_; }

 private:
  // The computation's instructions in schedule order: kernel calls and control flow.
  void EmitComputation(const Computation& c) {
    for (const Instruction* instr : buffers_.schedule(&c)) {
      switch (instr->opcode()) {
        case Opcode::kFusion:
          kernels_.push_back(EmitKernelCall(instr, static_cast<int>(kernels_.size())));
          kernels_.back().loop = loop_name_;
          break;
        case Opcode::kCustomCall:
          kernels_.push_back(EmitCustomCall(instr));
          kernels_.back().loop = loop_name_;
          break;
        case Opcode::kWhile:
          EmitWhile(instr);
          break;
        case Opcode::kConditional:
          EmitConditional(instr);
          break;
        default:
          break;
      }
    }
  }

  void EmitCopies(const std::vector<BufferCopy>& copies) {
    for (const BufferCopy& copy : copies) {
      if (copy.source.size == 0) continue;
      b_->CreateMemCpy(SlicePointer(copy.target), llvm::MaybeAlign(16), SlicePointer(copy.source),
                       llvm::MaybeAlign(16), copy.source.size);
    }
  }

  // A native loop: the state copied in, then the condition's kernels and a test of its
  // result (a counter for counted loops), the body's kernels and the copies that complete
  // the next state.
  void EmitWhile(const Instruction* loop) {
    Builder& b = *b_;
    const BufferAssignment::LoopPlan& plan = buffers_.loop(loop);
    EmitCopies(plan.before);
    // Names are unique within a computation: a nested loop is named with its enclosing one.
    std::string name = loop_name_.empty() ? loop->name() : loop_name_ + "/" + loop->name();
    loops_.push_back({name, loop_name_, plan.counter_offset});
    std::string saved = loop_name_;
    loop_name_ = name;
    llvm::BasicBlock* pre = b.GetInsertBlock();
    llvm::BasicBlock* header = llvm::BasicBlock::Create(ctx_, "while.header." + loop->name(), fn_);
    llvm::BasicBlock* body = llvm::BasicBlock::Create(ctx_, "while.body." + loop->name(), fn_);
    llvm::BasicBlock* exit = llvm::BasicBlock::Create(ctx_, "while.exit." + loop->name(), fn_);
    b.CreateBr(header);
    b.SetInsertPoint(header);
    llvm::PHINode* iterations = b.CreatePHI(b.getInt64Ty(), 2, "iterations");
    iterations->addIncoming(b.getInt64(0), pre);
    int64_t trip_count = loop->attrs().trip_count;
    if (trip_count >= 0) {
      // A counted loop (scan, fori_loop): its condition's kernels need not run.
      b.CreateCondBr(b.CreateICmpSLT(iterations, b.getInt64(trip_count)), body, exit);
    } else {
      const Computation* cond = loop->while_condition();
      EmitComputation(*cond);
      llvm::Value* pred = b.CreateLoad(b.getInt8Ty(), SlicePointer(buffers_.Get(cond->root())));
      b.CreateCondBr(b.CreateICmpNE(pred, b.getInt8(0)), body, exit);
    }
    b.SetInsertPoint(body);
    EmitComputation(*loop->while_body());
    EmitCopies(plan.after_body);
    llvm::Value* next = b.CreateAdd(iterations, b.getInt64(1));
    iterations->addIncoming(next, b.GetInsertBlock());
    b.CreateBr(header);
    b.SetInsertPoint(exit);
    // Iterations of this loop in this call (runs of an inner loop add up).
    llvm::Value* counter = b.CreateConstGEP1_64(b.getInt8Ty(), fn_->getArg(2), plan.counter_offset);
    b.CreateStore(b.CreateAdd(b.CreateLoad(b.getInt64Ty(), counter), iterations), counter);
    loop_name_ = saved;
  }

  // A switch on the selector (clamped by the front end) over the branches.
  void EmitConditional(const Instruction* cond) {
    Builder& b = *b_;
    const Instruction* selector = cond->operand(0);
    const BufferSlice& s = buffers_.Get(selector);
    llvm::Type* t = selector->dtype() == DType::kPred ? b.getInt8Ty() : b.getInt32Ty();
    llvm::Value* index = b.CreateLoad(t, SlicePointer(s));
    if (selector->dtype() == DType::kPred) index = b.CreateZExt(b.CreateICmpNE(index, b.getInt8(0)), b.getInt32Ty());
    llvm::BasicBlock* merge = llvm::BasicBlock::Create(ctx_, "cond.merge." + cond->name(), fn_);
    int n = static_cast<int>(cond->called_computations().size());
    std::vector<llvm::BasicBlock*> blocks;
    for (int k = 0; k < n; ++k) {
      blocks.push_back(llvm::BasicBlock::Create(ctx_, "cond.branch" + std::to_string(k) + "." + cond->name(), fn_));
    }
    llvm::SwitchInst* sw = b.CreateSwitch(index, blocks.back(), n);
    for (int k = 0; k + 1 < n; ++k) sw->addCase(b.getInt32(k), blocks[k]);
    for (int k = 0; k < n; ++k) {
      b.SetInsertPoint(blocks[k]);
      EmitComputation(*cond->called_computations()[k]);
      EmitCopies(buffers_.branch_copies(cond, k));
      b.CreateBr(merge);
    }
    b.SetInsertPoint(merge);
  }

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
    bool in_place = buffers_.WritesInPlace(fusion);
    codegen::KernelPlan plan = codegen::PlanKernel(fusion, options_.vector_width, in_place);
    std::string name = "kernel." + std::to_string(number) + "." + fusion->name();
    llvm::Function* kernel = codegen::EmitKernel(module_, fusion, plan, name, in_place);

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
    // The kernel's work: the most element evaluations any of its ops makes. Reductions do
    // more per output element than their output size suggests, also over values the kernel
    // makes itself (an iota, random bits); an operand read through a slice counts only the
    // slice (a scan's step reads one row of its xs).
    int64_t work = elements;
    for (const auto& [i, evals] : Evaluations(*fusion->fused_computation())) {
      work = std::max(work, static_cast<int64_t>(evals));
    }
    info.parallel = work >= options_.parallel_min_elements && plan.units > 1;
    int64_t work_per_unit = std::max<int64_t>(1, work / std::max<int64_t>(plan.units, 1));
    int64_t grain = std::max<int64_t>(1, 16384 / work_per_unit);
    // Units that are elements go to threads in whole vectors: a chunk that starts or ends
    // mid-vector runs its elements on the scalar tail loop.
    if (plan.mode != codegen::KernelPlan::Mode::kRows) grain = (grain + plan.width - 1) / plan.width * plan.width;
    if (plan.mode == codegen::KernelPlan::Mode::kWholeLoop) {
      // Each lane runs every step: all the work is in the units. With per-step reductions,
      // threads take whole blocks of lanes (each block's partial sums are its own).
      WholeLoopLayout layout = GetWholeLoopLayout(fusion->attrs(), *fusion->fused_computation());
      info.parallel = plan.units > 1 && plan.units * std::max<int64_t>(layout.trip_count, 1) >= options_.parallel_min_elements;
      grain = layout.reductions > 0 ? layout.block_lanes : plan.width;
    }
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
  std::vector<KernelInfo> kernels_;
  std::vector<LoopInfo> loops_;
  std::string loop_name_;  // the loop whose body is being emitted
};

}  // namespace

CpuProgram CompileCpuProgram(const Module& module, const BufferAssignment& buffers,
                             const CpuOptions& options) {
  JitEngine& jit = JitEngine::Get();
  auto context = std::make_unique<llvm::LLVMContext>();
  auto llvm_module = std::make_unique<llvm::Module>(module.name(), *context);
  CpuProgram program;
  ProgramEmitter emitter(*llvm_module, buffers, options);
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
