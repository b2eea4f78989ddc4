// GPU intrinsics (see gpu_intrinsics.h).
#include "codegen/gpu/gpu_intrinsics.h"

#include "llvm/IR/IntrinsicsNVPTX.h"
#include "support/error.h"

namespace fj::codegen {
namespace {

class NvvmIntrinsics final : public GpuIntrinsics {
 public:
  llvm::Value* Read(Builder& b, SpecialRegister r) const override {
    llvm::Intrinsic::ID id = llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x;
    switch (r) {
      case SpecialRegister::kTidX: id = llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x; break;
      case SpecialRegister::kNtidX: id = llvm::Intrinsic::nvvm_read_ptx_sreg_ntid_x; break;
      case SpecialRegister::kCtaidX: id = llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x; break;
      case SpecialRegister::kNctaidX: id = llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_x; break;
    }
    return b.CreateIntrinsic(id, {}, {});
  }
  llvm::Value* ShuffleXor32(Builder& b, llvm::Value* v, int mask) const override {
    // shfl.sync.bfly.b32 over the full warp; c = 0x1f: lanes wrap within the warp.
    return b.CreateIntrinsic(llvm::Intrinsic::nvvm_shfl_sync_bfly_i32, {},
                             {b.getInt32(0xffffffffu), v, b.getInt32(mask), b.getInt32(0x1f)});
  }
  bool emulated() const override { return false; }
};

// Calls the emulator's entry points by address, as generated CPU code calls custom calls.
class EmulatedIntrinsics final : public GpuIntrinsics {
 public:
  llvm::Value* Read(Builder& b, SpecialRegister r) const override {
    llvm::CallInst* call = Call(b, reinterpret_cast<uintptr_t>(GetEmulatorEntryPoints().special_register),
                                {b.getInt32(static_cast<int32_t>(r))});
    call->setDoesNotAccessMemory();  // fixed for the thread that runs the kernel
    return call;
  }
  llvm::Value* ShuffleXor32(Builder& b, llvm::Value* v, int mask) const override {
    return Call(b, reinterpret_cast<uintptr_t>(GetEmulatorEntryPoints().shuffle_xor), {v, b.getInt32(mask)});
  }
  bool emulated() const override { return true; }

 private:
  static llvm::CallInst* Call(Builder& b, uintptr_t address, std::vector<llvm::Value*> args) {
    std::vector<llvm::Type*> params(args.size(), b.getInt32Ty());
    auto* type = llvm::FunctionType::get(b.getInt32Ty(), params, false);
    llvm::Value* fn = llvm::ConstantExpr::getIntToPtr(b.getInt64(static_cast<int64_t>(address)),
                                                      llvm::PointerType::getUnqual(b.getContext()));
    llvm::CallInst* call = b.CreateCall(type, fn, args);
    call->setDoesNotThrow();
    return call;
  }
};

}  // namespace

llvm::Value* GpuIntrinsics::ShuffleXor(Builder& b, llvm::Value* v, int mask) const {
  llvm::Type* t = v->getType();
  unsigned bits = t->getPrimitiveSizeInBits();
  if (bits == 32) {
    llvm::Value* i = t->isIntegerTy() ? v : b.CreateBitCast(v, b.getInt32Ty());
    llvm::Value* r = ShuffleXor32(b, i, mask);
    return t->isIntegerTy() ? r : b.CreateBitCast(r, t);
  }
  if (bits < 32) {
    llvm::Value* wide = t->isIntegerTy() ? b.CreateZExt(v, b.getInt32Ty())
                                         : b.CreateZExt(b.CreateBitCast(v, b.getIntNTy(bits)), b.getInt32Ty());
    llvm::Value* r = b.CreateTrunc(ShuffleXor32(b, wide, mask), b.getIntNTy(bits));
    return t->isIntegerTy() ? r : b.CreateBitCast(r, t);
  }
  FJ_CHECK(bits == 64, "a shuffle of a ", bits, "-bit value");
  llvm::Value* i = t->isIntegerTy() ? v : b.CreateBitCast(v, b.getInt64Ty());
  llvm::Value* lo = ShuffleXor32(b, b.CreateTrunc(i, b.getInt32Ty()), mask);
  llvm::Value* hi = ShuffleXor32(b, b.CreateTrunc(b.CreateLShr(i, 32), b.getInt32Ty()), mask);
  llvm::Value* r = b.CreateOr(b.CreateZExt(lo, b.getInt64Ty()), b.CreateShl(b.CreateZExt(hi, b.getInt64Ty()), 32));
  return t->isIntegerTy() ? r : b.CreateBitCast(r, t);
}

std::unique_ptr<GpuIntrinsics> MakeNvvmIntrinsics() { return std::make_unique<NvvmIntrinsics>(); }
std::unique_ptr<GpuIntrinsics> MakeEmulatedIntrinsics() { return std::make_unique<EmulatedIntrinsics>(); }

}  // namespace fj::codegen
