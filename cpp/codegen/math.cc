// Transcendental functions (see math.h). This first version calls the C library lane by
// lane; vectorised polynomial versions replace the calls function by function.
#include "codegen/math.h"

#include <string>

namespace fj::codegen {
namespace {

bool IsF32(llvm::Value* x) { return x->getType()->getScalarType()->isFloatTy(); }

llvm::Value* Libm(Builder& b, const char* f32_name, llvm::ArrayRef<llvm::Value*> args) {
  std::string name = f32_name;
  if (!IsF32(args[0])) name.pop_back();  // "sinf" -> "sin"
  return CallLibmPerLane(b, name.c_str(), args);
}

}  // namespace

llvm::Value* CallLibmPerLane(Builder& b, const char* name, llvm::ArrayRef<llvm::Value*> args) {
  llvm::Module* m = b.GetInsertBlock()->getModule();
  llvm::Type* type = args[0]->getType();
  llvm::Type* scalar = type->getScalarType();
  std::vector<llvm::Type*> params(args.size(), scalar);
  llvm::FunctionCallee fn =
      m->getOrInsertFunction(name, llvm::FunctionType::get(scalar, params, false));
  if (auto* f = llvm::dyn_cast<llvm::Function>(fn.getCallee())) {
    f->setDoesNotThrow();
    f->setOnlyAccessesInaccessibleMemory();  // errno only
  }
  auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(type);
  if (!vt) return b.CreateCall(fn, args);
  llvm::Value* out = llvm::UndefValue::get(type);
  for (unsigned l = 0; l < vt->getNumElements(); ++l) {
    std::vector<llvm::Value*> lane_args;
    for (llvm::Value* a : args) lane_args.push_back(b.CreateExtractElement(a, l));
    out = b.CreateInsertElement(out, b.CreateCall(fn, lane_args), l);
  }
  return out;
}

llvm::Value* EmitExp(Builder& b, llvm::Value* x) { return Libm(b, "expf", {x}); }
llvm::Value* EmitExpm1(Builder& b, llvm::Value* x) { return Libm(b, "expm1f", {x}); }
llvm::Value* EmitLog(Builder& b, llvm::Value* x) { return Libm(b, "logf", {x}); }
llvm::Value* EmitLog1p(Builder& b, llvm::Value* x) { return Libm(b, "log1pf", {x}); }
llvm::Value* EmitSin(Builder& b, llvm::Value* x) { return Libm(b, "sinf", {x}); }
llvm::Value* EmitCos(Builder& b, llvm::Value* x) { return Libm(b, "cosf", {x}); }
llvm::Value* EmitTan(Builder& b, llvm::Value* x) { return Libm(b, "tanf", {x}); }
llvm::Value* EmitTanh(Builder& b, llvm::Value* x) { return Libm(b, "tanhf", {x}); }
llvm::Value* EmitAtan2(Builder& b, llvm::Value* y, llvm::Value* x) { return Libm(b, "atan2f", {y, x}); }
llvm::Value* EmitPow(Builder& b, llvm::Value* x, llvm::Value* y) { return Libm(b, "powf", {x, y}); }

}  // namespace fj::codegen
