// Reading and writing a kernel's buffers element by element: scalar, vector, gathered and
// scattered loads and stores, and constants as module globals. Shared by the kernel,
// scatter, whole-loop and program emitters.
#pragma once

#include "codegen/llvm_util.h"
#include "ir/instruction.h"

namespace fj::codegen {

// Loads the elements of a buffer of `t` at `linear` (`width` lanes): a scalar load for a
// uniform index, a vector load for consecutive lanes, else a gather (one load where data
// indices turn out consecutive at run time); pred is stored as i8.
Val LoadElements(Builder& b, llvm::Value* base, DType t, const IndexDim& linear, int width);
// Stores `v` at `linear` (consecutive lanes: a vector store; else a scatter).
void StoreElements(Builder& b, llvm::Value* base, DType t, const IndexDim& linear, const Val& v, int width);
// A value of `t` as it is stored (pred widened to i8).
llvm::Value* StoreValue(Builder& b, DType t, llvm::Value* v);

// A private global holding a constant's bytes, 64-byte aligned (created once per module).
llvm::GlobalVariable* ConstantGlobal(llvm::Module& module, const Instruction* constant);

}  // namespace fj::codegen
