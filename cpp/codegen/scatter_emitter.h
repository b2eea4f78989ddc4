// Scatter kernels: how a scatter's work is split into units (PlanScatter) and the code of a
// range of them (EmitScatterUnits). Used by the kernel emitter for kScatter fusions.
#pragma once

#include "codegen/kernel_emitter.h"

namespace fj::codegen {

KernelPlan PlanScatter(const Instruction* scatter, int max_width, bool in_place);

void EmitScatterUnits(Builder& b, ElementalEmitter& emitter, const Instruction* scatter, llvm::Value* out,
                      const KernelPlan& plan, llvm::Value* begin, llvm::Value* end);

}  // namespace fj::codegen
