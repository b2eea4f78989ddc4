// Transposes a CPU kernel reads by square blocks transposed in registers
// (IsBlockTransposed): the kernel emitter walks tiles of `width` rows, and for each vector of
// columns fills one stack buffer per transpose with its width x width block, loaded as rows of
// its operand and transposed by shuffles; the tile's rows then read their vector there.
#pragma once

#include <vector>

#include "codegen/elemental.h"

namespace fj::codegen {

struct TransposeBlocks {
  int width = 0;
  std::vector<const Instruction*> transposes;
  std::vector<llvm::Value*> buffers;  // width vectors of width lanes each, in the entry block
  bool empty() const { return transposes.empty(); }
};

// The block-transposed transposes of `comp` and their buffers (none unless `width` is a
// power of two of at most kMaxBlockLanes).
TransposeBlocks AllocateTransposeBlocks(Builder& b, llvm::Function* body, const Computation& comp, int width);

// Fills the buffers with the blocks of the tile whose first row has outer indices `outer`
// (of the kernel's `dims`; its rows run along the second-to-last), columns from `column`.
void FillTransposeBlocks(Builder& b, ElementalEmitter& emitter, const TransposeBlocks& blocks,
                         const std::vector<int64_t>& dims, const std::vector<llvm::Value*>& outer,
                         llvm::Value* column);

// Hands the emitter row `r` of the tile as each transpose's value in the row whose outer
// index is `outer` (until ForgetRowValues).
void ReadTransposeBlocks(Builder& b, ElementalEmitter& emitter, const TransposeBlocks& blocks,
                         const std::vector<IndexDim>& outer, llvm::Value* r);

}  // namespace fj::codegen
