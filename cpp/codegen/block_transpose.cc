// Block transposes (see block_transpose.h).
#include "codegen/block_transpose.h"

#include "analysis/kernel_heroes.h"
#include "ir/computation.h"

namespace fj::codegen {
namespace {

llvm::Type* BlockVector(Builder& b, const Instruction* t, int width) {
  return WithWidth(RegisterType(b.getContext(), t->dtype()), width);
}

}  // namespace

TransposeBlocks AllocateTransposeBlocks(Builder& b, llvm::Function* body, const Computation& comp, int width) {
  TransposeBlocks blocks;
  blocks.width = width;
  if (width < 2 || width > kMaxBlockLanes || (width & (width - 1)) != 0) return blocks;
  llvm::IRBuilderBase::InsertPointGuard guard(b);
  b.SetInsertPoint(&body->getEntryBlock(), body->getEntryBlock().begin());
  for (const Instruction* i : comp.MakePostOrder()) {
    if (!IsBlockTransposed(i)) continue;
    auto* buffer = b.CreateAlloca(llvm::ArrayType::get(BlockVector(b, i, width), width), nullptr, "block." + i->name());
    buffer->setAlignment(llvm::Align(64));
    blocks.transposes.push_back(i);
    blocks.buffers.push_back(buffer);
  }
  return blocks;
}

void FillTransposeBlocks(Builder& b, ElementalEmitter& emitter, const TransposeBlocks& blocks,
                         const std::vector<int64_t>& dims, const std::vector<llvm::Value*>& outer,
                         llvm::Value* column) {
  const int w = blocks.width;
  const int rank = static_cast<int>(dims.size());
  for (size_t k = 0; k < blocks.transposes.size(); ++k) {
    const Instruction* t = blocks.transposes[k];
    const std::vector<int64_t>& perm = t->dimensions();
    LaneMath lanes(b, w);
    emitter.PushScope();
    std::vector<llvm::Value*> v(w);
    for (int c = 0; c < w; ++c) {
      // Operand row c of the block: the transpose's column `column` + c, its rows in lanes.
      Index at;
      at.dims.resize(rank);
      for (int d = 0; d < rank - 2; ++d) at.dims[perm[d]] = dims[d] == 1 ? lanes.Constant(0) : lanes.Uniform(outer[d]);
      at.dims[perm[rank - 2]] = lanes.LaneRamp(outer[rank - 2]);
      at.dims[perm[rank - 1]] = lanes.Uniform(b.CreateAdd(column, b.getInt64(c)));
      v[c] = lanes.Widen(emitter.Emit(t->operand(0), at));
    }
    emitter.PopScope();
    TransposeSquare(b, v);
    for (int r = 0; r < w; ++r) {
      b.CreateAlignedStore(v[r], b.CreateConstGEP1_64(BlockVector(b, t, w), blocks.buffers[k], r), llvm::Align(64));
    }
  }
}

void ReadTransposeBlocks(Builder& b, ElementalEmitter& emitter, const TransposeBlocks& blocks,
                         const std::vector<IndexDim>& outer, llvm::Value* r) {
  for (size_t k = 0; k < blocks.transposes.size(); ++k) {
    llvm::Type* vector = BlockVector(b, blocks.transposes[k], blocks.width);
    llvm::Value* at = b.CreateGEP(vector, blocks.buffers[k], r);
    // Read only at the row's own positions (IsBlockTransposed): the vector the tile's
    // current columns hold.
    emitter.KeepRowValue(blocks.transposes[k], {outer, [&b, at, vector](const IndexDim&, int) {
                                                  return Val{b.CreateAlignedLoad(vector, at, llvm::Align(64)), true};
                                                }});
  }
}

}  // namespace fj::codegen
