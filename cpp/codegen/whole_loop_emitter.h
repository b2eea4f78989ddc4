// The whole-loop kernel (FusionKind::kWholeLoop, ir/whole_loop.h): for each group of
// `width` lanes, the carries are loaded once, the step loop runs with them in registers
// (phi values), each step's per-lane outputs are stored at their row and its reductions
// added to the partial result of the lanes' block, and the final carries are stored.
//
// The CPU kernel (EmitKernel) runs lanes [begin, end); with reductions, begin and end are
// multiples of the lanes per block.
#pragma once

#include <string>

#include "codegen/elemental.h"
#include "codegen/llvm_util.h"
#include "ir/instruction.h"

namespace fj::codegen {

// The lanes of a whole-loop fusion (its kernel's units).
int64_t WholeLoopLanes(const Instruction* fusion);

// The kernel's body over lanes [begin, end) (see EmitKernelBody for the form). With
// `warp` (GPU), [begin, end) are the 32 lanes of a warp, one per thread, and per-step
// reductions combine the warp's lanes with shuffles into the warp's block.
llvm::Function* EmitWholeLoopBody(llvm::Module& module, const Instruction* fusion, int width,
                                  const std::string& name, const WarpCooperation* warp = nullptr);

}  // namespace fj::codegen
