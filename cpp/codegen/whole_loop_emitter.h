// The whole-loop kernel (FusionKind::kWholeLoop, ir/whole_loop.h): for each group of
// `width` lanes, the carries are loaded once, the step loop runs with them in registers
// (phi values), each step's per-lane outputs are stored at their row and its reductions
// added to the partial result of the lanes' block, and the final carries are stored.
//
// Signature as every kernel's: void @name(ptr %buffers, i64 %begin, i64 %end) over lanes
// [begin, end); with reductions, begin and end are multiples of the lanes per block.
#pragma once

#include <string>

#include "codegen/llvm_util.h"
#include "ir/instruction.h"

namespace fj::codegen {

// The lanes of a whole-loop fusion (its kernel's units).
int64_t WholeLoopLanes(const Instruction* fusion);

llvm::Function* EmitWholeLoopKernel(llvm::Module& module, const Instruction* fusion, int width,
                                    const std::string& name);

}  // namespace fj::codegen
