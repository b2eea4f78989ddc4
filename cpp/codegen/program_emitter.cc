// The shared program emitter (see program_emitter.h).
#include "codegen/program_emitter.h"

#include "codegen/kernel_emitter.h"

namespace fj::codegen {

ProgramEmitter::ProgramEmitter(llvm::Module& module, const BufferAssignment& buffers)
    : module_(module), ctx_(module.getContext()), buffers_(buffers), ptr_(llvm::PointerType::getUnqual(ctx_)) {}

std::vector<KernelInfo> ProgramEmitter::Emit(const Computation& entry) {
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

void ProgramEmitter::EmitComputation(const Computation& c) {
  for (const Instruction* instr : buffers_.schedule(&c)) {
    switch (instr->opcode()) {
      case Opcode::kFusion:
        kernels_.push_back(EmitKernelCall(instr, static_cast<int>(kernels_.size())));
        kernels_.back().loop = loop_name_;
        break;
      case Opcode::kCustomCall:
        kernels_.push_back(EmitCustomCall(instr, static_cast<int>(kernels_.size())));
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

void ProgramEmitter::EmitCopy(llvm::Value* dst, llvm::Value* src, int64_t bytes) {
  b_->CreateMemCpy(dst, llvm::MaybeAlign(16), src, llvm::MaybeAlign(16), bytes);
}

llvm::Value* ProgramEmitter::ReadScalar(llvm::Type* type, llvm::Value* ptr) { return b_->CreateLoad(type, ptr); }

void ProgramEmitter::EmitCopies(const std::vector<BufferCopy>& copies) {
  for (const BufferCopy& copy : copies) {
    if (copy.source.size == 0) continue;
    EmitCopy(SlicePointer(copy.target), SlicePointer(copy.source), copy.source.size);
  }
}

// A native loop: the state copied in, then the condition's kernels and a test of its
// result (a counter for counted loops), the body's kernels and the copies that complete
// the next state.
void ProgramEmitter::EmitWhile(const Instruction* loop) {
  Builder& b = *b_;
  const BufferAssignment::LoopPlan& plan = buffers_.loop(loop);
  EmitCopies(plan.before);
  // Names are unique within a computation: a nested loop is named with its enclosing one.
  std::string name = loop_name_.empty() ? loop->name() : loop_name_ + "/" + loop->name();
  int64_t counter_offset = CounterOffset(plan, static_cast<int>(loops_.size()));
  loops_.push_back({name, loop_name_, counter_offset});
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
    llvm::Value* pred = ReadScalar(b.getInt8Ty(), SlicePointer(buffers_.Get(cond->root())));
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
  llvm::Value* counter = b.CreateConstGEP1_64(b.getInt8Ty(), fn_->getArg(2), counter_offset);
  b.CreateStore(b.CreateAdd(b.CreateLoad(b.getInt64Ty(), counter), iterations), counter);
  loop_name_ = saved;
}

// A switch on the selector (clamped by the front end) over the branches.
void ProgramEmitter::EmitConditional(const Instruction* cond) {
  Builder& b = *b_;
  const Instruction* selector = cond->operand(0);
  const BufferSlice& s = buffers_.Get(selector);
  llvm::Type* t = selector->dtype() == DType::kPred ? b.getInt8Ty() : b.getInt32Ty();
  llvm::Value* index = ReadScalar(t, SlicePointer(s));
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

llvm::Value* ProgramEmitter::LoadPointer(llvm::Value* table, int64_t i) {
  return b_->CreateLoad(ptr_, b_->CreateConstGEP1_64(ptr_, table, i));
}

llvm::Value* ProgramEmitter::SlicePointer(const BufferSlice& s) {
  switch (s.kind) {
    case BufferKind::kParameter: return LoadPointer(fn_->getArg(0), s.index);
    case BufferKind::kOutput: return LoadPointer(fn_->getArg(1), s.index);
    case BufferKind::kTemp: return b_->CreateConstGEP1_64(b_->getInt8Ty(), fn_->getArg(2), s.offset);
    case BufferKind::kConstant: return ConstantGlobal(module_, s.constant);
  }
  return nullptr;
}

llvm::Value* ProgramEmitter::BufferTable(const Instruction* instr, int num_outputs) {
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
    b.CreateStore(SlicePointer(buffers_.Get(instr->operand(k))), b.CreateConstGEP1_64(ptr_, table, num_outputs + k));
  }
  return table;
}

KernelInfo ProgramEmitter::Describe(const Instruction* instr, const std::string& name, const std::string& kind) const {
  KernelInfo info;
  info.name = name;
  info.fusion = instr->name();
  info.kind = kind;
  KernelTraffic traffic = KernelBytes(instr, buffers_.WritesInPlace(instr));
  info.bytes_read = traffic.bytes_read;
  info.bytes_written = traffic.bytes_written;
  return info;
}

}  // namespace fj::codegen
