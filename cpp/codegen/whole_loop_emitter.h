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

// How a CPU whole-loop kernel of `width`-lane machine vectors walks its lanes: groups of
// `group` vectors of `wide` lanes (several machine vectors each, within one block of
// partial results) step together; lanes left over go in `wide`, then `narrow` vectors,
// then one by one. `span`: the lanes a thread's chunk should hold at least (whole groups,
// whole blocks).
struct WholeLoopVectors {
  int narrow = 1;
  int wide = 1;
  int group = 1;
  int64_t span = 1;
};
WholeLoopVectors PlanWholeLoopVectors(const Instruction* fusion, int width);

// The kernel's body over lanes [begin, end) (see EmitKernelBody for the form). With
// `warp` (GPU), [begin, end) are the 32 lanes of a warp, one per thread, and per-step
// reductions combine the warp's lanes with shuffles into the warp's block.
llvm::Function* EmitWholeLoopBody(llvm::Module& module, const Instruction* fusion, int width,
                                  const std::string& name, const WarpCooperation* warp = nullptr);

}  // namespace fj::codegen
