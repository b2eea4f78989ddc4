// Building fusions: wrapping an instruction into a fusion and fusing producers into
// existing fusions. Shared by the kernel wrapper and the fusion passes.
#pragma once

#include "ir/module.h"

namespace fj {

// The fusion kind an instruction gets when it is the root (hero) of a kernel.
FusionKind KernelKindFor(const Instruction* instr);

// Replaces `instr` by a fusion instruction of `kind` whose fused computation holds a copy
// of it over one parameter per distinct operand. Returns the fusion.
Instruction* WrapInFusion(Instruction* instr, FusionKind kind);

// True for instructions that need a kernel of their own when left unfused.
bool NeedsKernel(const Instruction* instr);

}  // namespace fj
