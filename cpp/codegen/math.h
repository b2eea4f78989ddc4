// Transcendental functions as LLVM IR over f32/f64 scalars or vectors, shared by the CPU
// and GPU targets. See math.cc for the algorithms and their accuracy.
#pragma once

#include "codegen/llvm_util.h"

namespace fj::codegen {

llvm::Value* EmitExp(Builder& b, llvm::Value* x);
llvm::Value* EmitExpm1(Builder& b, llvm::Value* x);
llvm::Value* EmitLog(Builder& b, llvm::Value* x);
llvm::Value* EmitLog1p(Builder& b, llvm::Value* x);
llvm::Value* EmitSin(Builder& b, llvm::Value* x);
llvm::Value* EmitCos(Builder& b, llvm::Value* x);
llvm::Value* EmitTan(Builder& b, llvm::Value* x);
llvm::Value* EmitTanh(Builder& b, llvm::Value* x);
llvm::Value* EmitAtan2(Builder& b, llvm::Value* y, llvm::Value* x);
llvm::Value* EmitPow(Builder& b, llvm::Value* x, llvm::Value* y);

// Calls the C library function `name` (e.g. "sinf") on every lane of `args`.
llvm::Value* CallLibmPerLane(Builder& b, const char* name, llvm::ArrayRef<llvm::Value*> args);

}  // namespace fj::codegen
