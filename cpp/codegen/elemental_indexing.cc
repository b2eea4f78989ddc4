// The elemental emitter's data movement (see elemental.h): ops whose output element is an
// input element found by index arithmetic (iota, reshape, concatenate, pad, dynamic slices,
// gathers, dynamic-update-slice), as opposed to arithmetic on elements (elemental.cc) and
// loops over operands (elemental_loops.cc).
#include "codegen/elemental.h"
#include "llvm/IR/InlineAsm.h"
#include "llvm/TargetParser/Triple.h"
#include "support/error.h"

namespace fj::codegen {

// A scalar index used as data (an iota: threefry's counters are iotas), passed through an
// empty inline asm that emits no instruction, on CPU targets. Without it LLVM's loop
// strength reduction takes every add of a threefry chain on a loop's index for an induction
// variable: 3 s of code generation for one 600-instruction scalar tail loop, most of the
// time of any program drawing random numbers in a kernel. Addresses still use the index
// itself; only the scalar loops (tails, width-1 kernels) are concerned, vectors are not
// analysed so.
llvm::Value* ElementalEmitter::HiddenFromScalarEvolution(llvm::Value* v) {
  llvm::Module* m = b_.GetInsertBlock()->getModule();
  llvm::Triple triple(m->getTargetTriple());
  if (!v->getType()->isIntegerTy(64) || !(triple.isX86() || triple.isAArch64())) return v;
  auto* type = llvm::FunctionType::get(v->getType(), {v->getType()}, false);
  return b_.CreateCall(llvm::InlineAsm::get(type, "", "=r,0", /*hasSideEffects=*/false), {v});
}

Val ElementalEmitter::EmitIota(const Instruction* instr, const Index& index) {
  LaneMath lanes = Lanes();
  int64_t d = instr->dimensions()[0];
  IndexDim i;
  if (index.linear) {
    // A flat index (a flat kernel's rank-1 iota, or an iota read through a reshape): the
    // position along `d` is derived from it.
    i = instr->shape().rank() == 1 ? *index.linear
                                   : MultiIndex(lanes, *index.linear, instr->shape().dims()).dims[d];
  } else {
    i = index.dims[d];
  }
  DType t = instr->dtype();
  llvm::Type* scalar = RegisterType(b_.getContext(), t);
  bool varying = !i.uniform();
  llvm::Value* v = varying ? lanes.Materialize(i) : i.base;
  llvm::Type* to = varying ? WithWidth(scalar, width_) : scalar;
  if (IsLowPrecisionFloat(t)) ThrowInternal("codegen: iota of ", DTypeName(t), " (the low-precision pass computes it in f32)");
  if (!to->isVectorTy()) v = HiddenFromScalarEvolution(v);
  v = IsFloat(t) ? b_.CreateSIToFP(v, to) : b_.CreateTrunc(v, to);
  return {v, varying};
}

Val ElementalEmitter::EmitReshape(const Instruction* instr, const Index& index) {
  const Instruction* x = instr->operand(0);
  const std::vector<int64_t>& out_dims = instr->shape().dims();
  const std::vector<int64_t>& in_dims = x->shape().dims();
  if (index.linear || out_dims == in_dims) return Emit(x, index);
  LaneMath lanes = Lanes();
  // Only size-1 dimensions inserted or removed: map the others one to one.
  std::vector<int64_t> out_big, in_big;
  for (size_t k = 0; k < out_dims.size(); ++k) {
    if (out_dims[k] != 1) out_big.push_back(k);
  }
  for (size_t k = 0; k < in_dims.size(); ++k) {
    if (in_dims[k] != 1) in_big.push_back(k);
  }
  bool degenerate = out_big.size() == in_big.size();
  for (size_t j = 0; degenerate && j < out_big.size(); ++j) {
    degenerate = out_dims[out_big[j]] == in_dims[in_big[j]];
  }
  Index sub;
  sub.dims.assign(in_dims.size(), lanes.Constant(0));
  if (degenerate) {
    for (size_t j = 0; j < in_big.size(); ++j) sub.dims[in_big[j]] = index.dims[out_big[j]];
    return Emit(x, sub);
  }
  // Trailing dimensions both shapes share map one to one; when the lanes vary only in
  // those, the leading ones are re-indexed as scalars, and a contiguous run of lanes stays
  // one (a [64, 1563, 64] view of [100032, 64] reads whole rows, not a gather).
  size_t suffix = 0;
  while (suffix < out_dims.size() && suffix < in_dims.size() &&
         out_dims[out_dims.size() - 1 - suffix] == in_dims[in_dims.size() - 1 - suffix]) {
    ++suffix;
  }
  size_t out_lead = out_dims.size() - suffix, in_lead = in_dims.size() - suffix;
  bool lead_uniform = suffix > 0;
  for (size_t k = 0; lead_uniform && k < out_lead; ++k) lead_uniform = index.dims[k].uniform();
  if (lead_uniform) {
    Index lead;
    lead.dims.assign(index.dims.begin(), index.dims.begin() + out_lead);
    LaneMath scalar(b_, 1);
    IndexDim position = LinearIndex(scalar, lead, {out_dims.begin(), out_dims.begin() + out_lead});
    Index in_lead_index = MultiIndex(scalar, position, {in_dims.begin(), in_dims.begin() + in_lead});
    for (size_t k = 0; k < in_lead; ++k) sub.dims[k] = in_lead_index.dims[k];
    for (size_t k = 0; k < suffix; ++k) sub.dims[in_lead + k] = index.dims[out_lead + k];
    return Emit(x, sub);
  }
  // Row-major buffers: the operand's element has the same linear position. Ops that need
  // dimensions derive them from it (EmitUncached); a parameter is read at it directly.
  Index sub_linear;
  sub_linear.linear = LinearIndex(lanes, index, out_dims);
  return Emit(x, sub_linear);
}

Val ElementalEmitter::EmitConcatenate(const Instruction* instr, const Index& index) {
  LaneMath lanes = Lanes();
  int64_t d = instr->dimensions()[0];
  const IndexDim& di = index.dims[d];
  std::vector<int64_t> offsets;
  int64_t offset = 0;
  for (const Instruction* op : instr->operands()) {
    offsets.push_back(offset);
    offset += op->shape().dim(d);
  }
  int n = instr->operand_count();
  if (!di.uniform()) {
    // Lanes may straddle operands: read each operand at a clamped index and select.
    auto straddling = [&]() -> Val {
      llvm::Value* pos = lanes.Materialize(di);
      Val result;
      for (int k = 0; k < n; ++k) {
        const Instruction* op = instr->operand(k);
        if (op->shape().dim(d) == 0) continue;
        Index sub = index;
        sub.dims[d] = lanes.Clamp(lanes.AddConst(di, -offsets[k]), 0, op->shape().dim(d) - 1);
        Val v = Emit(op, sub);
        if (!result.v) {
          result = {Widen(v), true};
          continue;
        }
        llvm::Value* in_op = b_.CreateICmpSGE(pos, lanes.Splat(b_.getInt64(offsets[k])));
        result = {b_.CreateSelect(in_op, Widen(v), result.v), true};
      }
      return result;
    };
    // A vector within one operand (all but those at a boundary: concatenate([obs, act], -1),
    // an LSTM gradient's gates): that operand alone, at its own positions, contiguous. The
    // straddling form reads every other operand too, at clamped positions, which were
    // gathers, and computed their values for nothing (the LSTM's gate derivatives 4 times:
    // 1.4-5x JAX's time). Once per concatenate a branch: a concatenate inside either form
    // selects, so that nested ones do not grow the code exponentially.
    if (di.vec || di.stride <= 0 || in_concat_branch_) return straddling();
    in_concat_branch_ = true;
    llvm::Value* lo = di.base;
    llvm::Value* hi = b_.CreateAdd(di.base, b_.getInt64((lanes.width() - 1) * di.stride));
    llvm::Function* fn = b_.GetInsertBlock()->getParent();
    llvm::LLVMContext& ctx = b_.getContext();
    llvm::BasicBlock* merge = llvm::BasicBlock::Create(ctx, "concat.merge", fn);
    std::vector<std::pair<llvm::BasicBlock*, llvm::Value*>> results;
    for (int k = 0; k < n; ++k) {
      const Instruction* op = instr->operand(k);
      if (op->shape().dim(d) < lanes.width() * di.stride) continue;  // (never holds a vector)
      llvm::BasicBlock* here = llvm::BasicBlock::Create(ctx, "concat.within", fn);
      llvm::BasicBlock* next = llvm::BasicBlock::Create(ctx, "concat.next", fn);
      llvm::Value* inside = b_.CreateAnd(b_.CreateICmpSGE(lo, b_.getInt64(offsets[k])),
                                         b_.CreateICmpSLT(hi, b_.getInt64(offsets[k] + op->shape().dim(d))));
      b_.CreateCondBr(inside, here, next);
      b_.SetInsertPoint(here);
      PushScope();
      Index sub = index;
      sub.dims[d] = lanes.AddConst(di, -offsets[k]);
      llvm::Value* v = Widen(Emit(op, sub));
      PopScope();
      results.push_back({b_.GetInsertBlock(), v});
      b_.CreateBr(merge);
      b_.SetInsertPoint(next);
    }
    PushScope();
    llvm::Value* v = straddling().v;
    PopScope();
    results.push_back({b_.GetInsertBlock(), v});
    b_.CreateBr(merge);
    b_.SetInsertPoint(merge);
    llvm::PHINode* phi = b_.CreatePHI(v->getType(), results.size());
    for (auto& [block, value] : results) phi->addIncoming(value, block);
    in_concat_branch_ = false;
    return {phi, true};
  }
  // A constant position: the one operand, no branches. (Branching would emit every
  // operand, each in a scope of its own, and concatenates of slices of concatenates - a
  // PRNG key split step after step in an unrolled loop - would grow exponentially.)
  if (auto* c = llvm::dyn_cast<llvm::ConstantInt>(di.base)) {
    int64_t at = c->getSExtValue();
    for (int k = 0; k < n; ++k) {
      const Instruction* op = instr->operand(k);
      if (at < offsets[k] || at >= offsets[k] + op->shape().dim(d)) continue;
      Index sub = index;
      sub.dims[d] = lanes.Constant(at - offsets[k]);
      return Emit(op, sub);
    }
  }
  // Uniform position along the concatenated dimension: branch to the one operand needed.
  llvm::Function* fn = b_.GetInsertBlock()->getParent();
  llvm::LLVMContext& ctx = b_.getContext();
  llvm::BasicBlock* merge = llvm::BasicBlock::Create(ctx, "concat.merge", fn);
  std::vector<std::pair<llvm::BasicBlock*, Val>> results;
  for (int k = 0; k < n; ++k) {
    const Instruction* op = instr->operand(k);
    if (op->shape().dim(d) == 0) continue;
    llvm::BasicBlock* here = llvm::BasicBlock::Create(ctx, "concat.op", fn);
    llvm::BasicBlock* next = nullptr;
    bool last = offsets[k] + op->shape().dim(d) == offset;
    if (last) {
      b_.CreateBr(here);
    } else {
      next = llvm::BasicBlock::Create(ctx, "concat.next", fn);
      b_.CreateCondBr(b_.CreateICmpSLT(di.base, b_.getInt64(offsets[k] + op->shape().dim(d))), here, next);
    }
    b_.SetInsertPoint(here);
    PushScope();
    Index sub = index;
    sub.dims[d] = lanes.AddConst(di, -offsets[k]);
    Val v = Emit(op, sub);
    PopScope();
    results.push_back({b_.GetInsertBlock(), v});
    b_.CreateBr(merge);
    if (last) break;
    b_.SetInsertPoint(next);
  }
  bool varying = std::any_of(results.begin(), results.end(), [](auto& r) { return r.second.varying; });
  if (varying) {
    for (auto& [block, v] : results) {
      if (v.varying) continue;
      b_.SetInsertPoint(block->getTerminator());
      v = {lanes.Splat(v.v), true};
    }
  }
  b_.SetInsertPoint(merge);
  llvm::PHINode* phi = b_.CreatePHI(results[0].second.v->getType(), results.size());
  for (auto& [block, v] : results) phi->addIncoming(v.v, block);
  return {phi, varying};
}

Val ElementalEmitter::EmitPad(const Instruction* instr, const Index& index) {
  LaneMath lanes = Lanes();
  const Instruction* x = instr->operand(0);
  Val pad_value = Emit(instr->operand(1), Index{});
  if (x->shape().NumElements() == 0) return pad_value;
  const std::vector<PadDim>& pad = instr->attrs().padding;
  // Each dimension on its own: an unpadded one passes its index through (a contiguous
  // run of lanes stays one), a uniform one is checked once for all lanes.
  Index sub;
  llvm::Value* inside = nullptr;  // i1, or <width x i1> once a varying dimension is checked
  for (size_t k = 0; k < pad.size(); ++k) {
    const IndexDim& d = index.dims[k];
    if (pad[k].low == 0 && pad[k].high == 0 && pad[k].interior == 0) {
      sub.dims.push_back(d);
      continue;
    }
    bool varying = !d.uniform();
    int64_t period = pad[k].interior + 1;
    llvm::Value* rel = varying ? lanes.Materialize(lanes.AddConst(d, -pad[k].low))
                               : b_.CreateSub(d.base, b_.getInt64(pad[k].low));
    auto c = [&](int64_t v) { return varying ? lanes.Splat(b_.getInt64(v)) : b_.getInt64(v); };
    llvm::Value* ok = b_.CreateICmpSGE(rel, c(0));
    if (period > 1) ok = b_.CreateAnd(ok, b_.CreateICmpEQ(b_.CreateSRem(rel, c(period)), c(0)));
    llvm::Value* pos = period > 1 ? b_.CreateSDiv(rel, c(period)) : rel;
    ok = b_.CreateAnd(ok, b_.CreateICmpSLT(pos, c(x->shape().dim(k))));
    if (inside && inside->getType()->isVectorTy() != ok->getType()->isVectorTy()) {
      if (!inside->getType()->isVectorTy()) inside = lanes.Splat(inside);
      if (!ok->getType()->isVectorTy()) ok = lanes.Splat(ok);
    }
    inside = inside ? b_.CreateAnd(inside, ok) : ok;
    IndexDim p = varying ? IndexDim{nullptr, 0, pos} : IndexDim{pos, 0, nullptr};
    sub.dims.push_back(lanes.Clamp(p, 0, x->shape().dim(k) - 1));
  }
  Val v = Emit(x, sub);
  if (!inside) return v;
  bool vector_test = inside->getType()->isVectorTy();
  if (vector_test || v.varying) {
    if (!vector_test) inside = lanes.Splat(inside);
    return {b_.CreateSelect(inside, Widen(v), Widen(pad_value)), true};
  }
  return {b_.CreateSelect(inside, v.v, pad_value.v), false};
}

std::vector<llvm::Value*> ElementalEmitter::StartIndices(const Instruction* instr, size_t first,
                                                         const std::vector<int64_t>& sizes) {
  std::vector<llvm::Value*> starts;
  const Shape& shape = instr->operand(0)->shape();
  WidthScope scalar(*this, 1);
  LaneMath lanes = Lanes();
  for (int k = 0; k < shape.rank(); ++k) {
    const Instruction* op = instr->operand(first + k);
    llvm::Value* s = ToI64(Emit(op, Index{}), op->dtype());
    starts.push_back(lanes.Clamp(lanes.Uniform(s), 0, shape.dim(k) - sizes[k]).base);
  }
  return starts;
}

Val ElementalEmitter::EmitDynamicSlice(const Instruction* instr, const Index& index) {
  LaneMath lanes = Lanes();
  std::vector<llvm::Value*> starts = StartIndices(instr, 1, instr->shape().dims());
  Index sub;
  for (size_t k = 0; k < starts.size(); ++k) sub.dims.push_back(lanes.Add(index.dims[k], lanes.Uniform(starts[k])));
  return Emit(instr->operand(0), sub);
}

// Each output element reads the operand at start + offset: the start from the indices at the
// element's batch position (clamped so that the slice fits, as XLA), the offset from its
// offset_dims. A varying index makes a gathered (per-lane) read.
Val ElementalEmitter::EmitGather(const Instruction* instr, const Index& index) {
  LaneMath lanes = Lanes();
  const Instruction* x = instr->operand(0);
  const Instruction* indices = instr->operand(1);
  const GatherDims& g = instr->attrs().gather;
  const std::vector<int64_t>& sizes = instr->dimensions();
  auto contains = [](const std::vector<int64_t>& v, int64_t d) { return std::count(v.begin(), v.end(), d) > 0; };
  std::vector<IndexDim> batch, offset;
  for (int d = 0; d < instr->shape().rank(); ++d) (contains(g.offset_dims, d) ? offset : batch).push_back(index.dims[d]);
  bool implicit = g.index_vector_dim == indices->shape().rank();
  Index sub;
  sub.dims.assign(x->shape().rank(), lanes.Constant(0));
  for (size_t k = 0; k < g.start_index_map.size(); ++k) {
    Index at;
    at.dims = batch;
    if (!implicit) at.dims.insert(at.dims.begin() + g.index_vector_dim, lanes.Constant(static_cast<int64_t>(k)));
    Val v = Emit(indices, at);
    llvm::Value* s = ToI64(v, indices->dtype());
    IndexDim start = v.varying ? IndexDim{nullptr, 0, s} : lanes.Uniform(s);
    int64_t d = g.start_index_map[k];
    sub.dims[d] = lanes.Clamp(start, 0, x->shape().dim(d) - sizes[d]);
  }
  size_t next = 0;
  for (int d = 0; d < x->shape().rank(); ++d) {
    if (!contains(g.collapsed_slice_dims, d)) sub.dims[d] = lanes.Add(sub.dims[d], offset[next++]);
  }
  return Emit(x, sub);
}

Val ElementalEmitter::EmitDynamicUpdateSlice(const Instruction* instr, const Index& index) {
  LaneMath lanes = Lanes();
  const Instruction* update = instr->operand(1);
  const std::vector<int64_t>& usize = update->shape().dims();
  std::vector<llvm::Value*> starts = StartIndices(instr, 2, usize);
  if (update->shape().NumElements() == 0) return Emit(instr->operand(0), index);
  bool varying = false;
  for (const IndexDim& d : index.dims) varying = varying || !d.uniform();
  llvm::Value* inside = nullptr;
  Index sub;
  for (size_t k = 0; k < starts.size(); ++k) {
    IndexDim rel = lanes.Add(index.dims[k], lanes.Uniform(b_.CreateNeg(starts[k])));
    llvm::Value* r = varying ? lanes.Materialize(rel) : rel.base;
    auto c = [&](int64_t v) { return varying ? lanes.Splat(b_.getInt64(v)) : b_.getInt64(v); };
    llvm::Value* ok = b_.CreateAnd(b_.CreateICmpSGE(r, c(0)), b_.CreateICmpSLT(r, c(usize[k])));
    inside = inside ? b_.CreateAnd(inside, ok) : ok;
    sub.dims.push_back(lanes.Clamp(rel, 0, usize[k] - 1));
  }
  Val u = Emit(update, sub);
  Val base = Emit(instr->operand(0), index);
  if (varying || u.varying || base.varying) {
    if (!varying) inside = lanes.Splat(inside);
    return {b_.CreateSelect(inside, Widen(u), Widen(base)), true};
  }
  return {b_.CreateSelect(inside, u.v, base.v), false};
}

}  // namespace fj::codegen
