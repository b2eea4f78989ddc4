// Buffer access (see buffer_access.h).
#include "codegen/buffer_access.h"

#include <algorithm>

namespace fj::codegen {
namespace {

// The elements a constant pattern's lanes span, from the lowest to the highest.
int64_t PatternSpan(const std::vector<int64_t>& offsets) {
  auto [lo, hi] = std::minmax_element(offsets.begin(), offsets.end());
  return *hi - *lo + 1;
}

}  // namespace

llvm::Value* StoreValue(Builder& b, DType t, llvm::Value* v) {
  return t == DType::kPred ? b.CreateZExt(v, v->getType()->isVectorTy()
                                                 ? WithWidth(b.getInt8Ty(), llvm::cast<llvm::FixedVectorType>(v->getType())->getNumElements())
                                                 : b.getInt8Ty())
                           : v;
}

Val LoadElements(Builder& b, llvm::Value* base, DType t, const IndexDim& linear, int width) {
  llvm::Type* storage = StorageType(b.getContext(), t);
  LaneMath lanes(b, width);
  llvm::Value* v;
  bool varying = width > 1 && !linear.uniform();
  if (!varying) {
    v = b.CreateLoad(storage, b.CreateGEP(storage, base, linear.base));
  } else if (!linear.vec && linear.stride == 1) {
    llvm::Type* vt = WithWidth(storage, width);
    v = b.CreateAlignedLoad(vt, b.CreateGEP(storage, base, linear.base), llvm::Align(DTypeBytes(t)));
  } else if (!linear.vec && linear.stride == -1) {
    // Lanes running backwards (a flip): the run they cover, reversed.
    llvm::Type* vt = WithWidth(storage, width);
    llvm::Value* start = b.CreateSub(linear.base, b.getInt64(width - 1));
    llvm::Value* run = b.CreateAlignedLoad(vt, b.CreateGEP(storage, base, start), llvm::Align(DTypeBytes(t)));
    std::vector<int> reversed(width);
    for (int l = 0; l < width; ++l) reversed[l] = width - 1 - l;
    v = b.CreateShuffleVector(run, reversed);
  } else if (!linear.vec && linear.stride >= 2 && linear.stride <= 4) {
    // Every stride-th element (x[:, ::2], the halves of an interleaved pair): the run they
    // span, loaded without its last stride - 1 elements (past the last lane: maybe past the
    // buffer), then the lanes picked out (a gather each was 3x JAX's time).
    const int s = static_cast<int>(linear.stride);
    const int n = s * width;
    std::vector<llvm::Constant*> mask(n);
    for (int k = 0; k < n; ++k) mask[k] = b.getInt1(k <= s * (width - 1));
    llvm::Value* run = b.CreateMaskedLoad(WithWidth(storage, n), b.CreateGEP(storage, base, linear.base),
                                          llvm::Align(DTypeBytes(t)), llvm::ConstantVector::get(mask));
    std::vector<int> picked(width);
    for (int l = 0; l < width; ++l) picked[l] = s * l;
    v = b.CreateShuffleVector(run, picked);
  } else if (linear.pattern && PatternSpan(*linear.pattern) <= 4 * width) {
    // Constant offsets spanning few elements (a group's statistic repeated over its
    // channels, rows of 4 in lanes): the elements they span, loaded once (all inside the
    // buffer: between two lanes' elements), then each lane's picked out.
    const std::vector<int64_t>& offsets = *linear.pattern;
    const int64_t lo = *std::min_element(offsets.begin(), offsets.end());
    const int64_t span = PatternSpan(offsets);
    llvm::Value* first = b.CreateGEP(storage, base, b.CreateAdd(linear.base, b.getInt64(lo)));
    std::vector<int> picked(width);
    for (int l = 0; l < width; ++l) picked[l] = static_cast<int>(offsets[l] - lo);
    if (span == 1) {
      v = b.CreateVectorSplat(width, b.CreateLoad(storage, first));
    } else {
      const int n = static_cast<int>(llvm::PowerOf2Ceil(static_cast<uint64_t>(span)));
      std::vector<llvm::Constant*> mask(n);
      for (int k = 0; k < n; ++k) mask[k] = b.getInt1(k < span);
      llvm::Value* run = b.CreateMaskedLoad(WithWidth(storage, n), first, llvm::Align(DTypeBytes(t)),
                                            llvm::ConstantVector::get(mask));
      v = b.CreateShuffleVector(run, picked);
    }
  } else if (!linear.vec) {
    llvm::Value* addrs = b.CreateGEP(storage, base, lanes.Materialize(linear));
    v = b.CreateMaskedGather(WithWidth(storage, width), addrs, llvm::Align(DTypeBytes(t)));
  } else {
    // Lanes whose indices are data (a gather's, an index computed from iotas) are often
    // consecutive all the same: the windows of a convolution's patch matrix are runs of
    // kernel-width x channels elements, an embedding's rows runs of its width. Tested at run
    // time, such a vector is one load instead of a gather of a lane at a time (the patches
    // of a DQN's first convolution took 3.6 ms as gathers).
    llvm::Type* vt = WithWidth(storage, width);
    llvm::Value* first = b.CreateExtractElement(linear.vec, uint64_t{0});
    llvm::Value* consecutive =
        b.CreateAndReduce(b.CreateICmpEQ(linear.vec, lanes.Materialize(lanes.LaneRamp(first))));
    llvm::Function* fn = b.GetInsertBlock()->getParent();
    llvm::BasicBlock* run = llvm::BasicBlock::Create(b.getContext(), "load.run", fn);
    llvm::BasicBlock* other = llvm::BasicBlock::Create(b.getContext(), "load.other", fn);
    llvm::BasicBlock* splat = llvm::BasicBlock::Create(b.getContext(), "load.splat", fn);
    llvm::BasicBlock* gather = llvm::BasicBlock::Create(b.getContext(), "load.gather", fn);
    llvm::BasicBlock* merge = llvm::BasicBlock::Create(b.getContext(), "load.merge", fn);
    b.CreateCondBr(consecutive, run, other);
    b.SetInsertPoint(run);
    llvm::Value* loaded = b.CreateAlignedLoad(vt, b.CreateGEP(storage, base, first), llvm::Align(DTypeBytes(t)));
    b.CreateBr(merge);
    // Lanes all at one place (clamped into an operand they are past: a concatenate's or a
    // pad's other pieces): one element, broadcast.
    b.SetInsertPoint(other);
    b.CreateCondBr(b.CreateAndReduce(b.CreateICmpEQ(linear.vec, b.CreateVectorSplat(width, first))), splat, gather);
    b.SetInsertPoint(splat);
    llvm::Value* one = b.CreateVectorSplat(width, b.CreateLoad(storage, b.CreateGEP(storage, base, first)));
    b.CreateBr(merge);
    b.SetInsertPoint(gather);
    llvm::Value* gathered =
        b.CreateMaskedGather(vt, b.CreateGEP(storage, base, linear.vec), llvm::Align(DTypeBytes(t)));
    b.CreateBr(merge);
    b.SetInsertPoint(merge);
    llvm::PHINode* phi = b.CreatePHI(vt, 3);
    phi->addIncoming(loaded, run);
    phi->addIncoming(one, splat);
    phi->addIncoming(gathered, gather);
    v = phi;
  }
  if (t == DType::kPred) v = b.CreateICmpNE(v, llvm::Constant::getNullValue(v->getType()));
  return {v, varying};
}

void StoreElements(Builder& b, llvm::Value* base, DType t, const IndexDim& linear, const Val& v, int width) {
  llvm::Type* storage = StorageType(b.getContext(), t);
  if (width == 1) {
    b.CreateStore(StoreValue(b, t, v.v), b.CreateGEP(storage, base, linear.base));
  } else if (linear.vec || linear.pattern || linear.stride != 1) {
    LaneMath lanes(b, width);
    llvm::Value* addrs = b.CreateGEP(storage, base, lanes.Materialize(linear));
    b.CreateMaskedScatter(StoreValue(b, t, lanes.Widen(v)), addrs, llvm::Align(DTypeBytes(t)));
  } else {
    llvm::Value* vec = LaneMath(b, width).Widen(v);
    b.CreateAlignedStore(StoreValue(b, t, vec), b.CreateGEP(storage, base, linear.base), llvm::Align(DTypeBytes(t)));
  }
}

llvm::GlobalVariable* ConstantGlobal(llvm::Module& module, const Instruction* constant) {
  std::string name = "const." + std::to_string(constant->unique_id());
  if (llvm::GlobalVariable* g = module.getNamedGlobal(name)) return g;
  const Literal& lit = constant->literal();
  const uint8_t* bytes = static_cast<const uint8_t*>(lit.data());
  llvm::ArrayRef<uint8_t> data(bytes, static_cast<size_t>(lit.byte_size()));
  llvm::Constant* init = llvm::ConstantDataArray::get(module.getContext(), data);
  auto* g = new llvm::GlobalVariable(module, init->getType(), /*isConstant=*/true,
                                     llvm::GlobalValue::PrivateLinkage, init, name);
  g->setAlignment(llvm::Align(64));
  g->setUnnamedAddr(llvm::GlobalValue::UnnamedAddr::Global);
  return g;
}

}  // namespace fj::codegen
