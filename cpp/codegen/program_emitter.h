// The program around the kernels, shared by the targets: the entry computation's kernels
// in schedule order, loops as native loops (counted, or testing their condition), branches
// as a switch, and the copies buffer assignment asks for. A target says how a kernel is
// called (a direct call or the thread pool on the CPU, a launch on the GPU), where buffers
// are, and how the host reads a loop's condition.
#pragma once

#include <string>
#include <vector>

#include "analysis/buffer_assignment.h"
#include "codegen/llvm_util.h"
#include "runtime/executable.h"

namespace fj::codegen {

class ProgramEmitter {
 public:
  ProgramEmitter(llvm::Module& module, const BufferAssignment& buffers);
  virtual ~ProgramEmitter() = default;

  // Emits `void fj_main(ptr params, ptr outputs, ptr temp, ptr runtime)` (FjEntryFn, or
  // FjGpuEntryFn on the GPU) and returns the kernels it runs, in program order.
  std::vector<KernelInfo> Emit(const Computation& entry);
  const std::vector<LoopInfo>& loops() const { return loops_; }

 protected:
  // A call of fusion `fusion` (the program's kernel number `number`).
  virtual KernelInfo EmitKernelCall(const Instruction* fusion, int number) = 0;
  // A call of a custom call's runtime kernel (the program's kernel number `number`).
  virtual KernelInfo EmitCustomCall(const Instruction* call, int number) = 0;
  // Where a buffer slice is: the CPU's temp arena is argument 2, the GPU's is elsewhere.
  virtual llvm::Value* SlicePointer(const BufferSlice& s);
  virtual void EmitCopy(llvm::Value* dst, llvm::Value* src, int64_t bytes);
  // A scalar of `type` read by the host at `ptr` (a loop's condition, a branch's selector).
  virtual llvm::Value* ReadScalar(llvm::Type* type, llvm::Value* ptr);
  // Where in argument 2 the iteration counter of the loop with `plan` (the n-th loop) is.
  virtual int64_t CounterOffset(const BufferAssignment::LoopPlan& plan, int n) { return plan.counter_offset; }

  // A stack table (in the entry block) filled with the buffers of `instr`'s outputs, then
  // its operands.
  llvm::Value* BufferTable(const Instruction* instr, int num_outputs);
  llvm::Value* LoadPointer(llvm::Value* table, int64_t i);
  // A kernel's description: the instruction, its kind and the bytes it moves.
  KernelInfo Describe(const Instruction* instr, const std::string& name, const std::string& kind) const;

  llvm::Module& module_;
  llvm::LLVMContext& ctx_;
  const BufferAssignment& buffers_;
  llvm::PointerType* ptr_;
  llvm::Function* fn_ = nullptr;
  Builder* b_ = nullptr;

 private:
  void EmitComputation(const Computation& c);
  void EmitCopies(const std::vector<BufferCopy>& copies);
  void EmitWhile(const Instruction* loop);
  void EmitConditional(const Instruction* cond);

  std::vector<KernelInfo> kernels_;
  std::vector<LoopInfo> loops_;
  std::string loop_name_;  // the loop whose body is being emitted
};

}  // namespace fj::codegen
