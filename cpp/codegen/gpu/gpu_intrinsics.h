// What a GPU kernel asks of the machine beyond arithmetic: its thread's indices and the
// exchange of values between the lanes of a warp. On the GPU these are NVVM intrinsics; in
// the emulation, calls into the emulator (runtime/gpu/emulated_device.h). Everything else
// of a kernel is the same IR for both.
#pragma once

#include <memory>

#include "codegen/llvm_util.h"
#include "runtime/gpu/emulated_device.h"

namespace fj::codegen {

class GpuIntrinsics {
 public:
  virtual ~GpuIntrinsics() = default;
  // The special register as an i32.
  virtual llvm::Value* Read(Builder& b, SpecialRegister r) const = 0;
  // The i32 `v` of lane (this lane xor `mask`) of the warp; every lane must take part.
  virtual llvm::Value* ShuffleXor32(Builder& b, llvm::Value* v, int mask) const = 0;
  // Whether kernels are compiled for the host (the emulation).
  virtual bool emulated() const = 0;

  // ShuffleXor32 for any scalar: narrow types widened, 64-bit ones in two halves.
  llvm::Value* ShuffleXor(Builder& b, llvm::Value* v, int mask) const;
};

std::unique_ptr<GpuIntrinsics> MakeNvvmIntrinsics();
std::unique_ptr<GpuIntrinsics> MakeEmulatedIntrinsics();

}  // namespace fj::codegen
