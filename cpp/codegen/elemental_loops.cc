// The elemental emitter's loops (see elemental.h): combiners, counted loops, and the ops
// that loop over their operands for each output element: reductions, arg-reductions and
// dots.
#include <algorithm>

#include "codegen/elemental.h"
#include "llvm/IR/Intrinsics.h"
#include "support/error.h"

namespace fj::codegen {
namespace {

bool Contains(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

}  // namespace

llvm::Value* ElementalEmitter::EmitCombiner(const Computation& combiner, llvm::Value* a,
                                            llvm::Value* b) {
  std::unordered_map<const Instruction*, llvm::Value*> values;
  int width = a->getType()->isVectorTy()
                  ? static_cast<int>(llvm::cast<llvm::FixedVectorType>(a->getType())->getNumElements())
                  : 1;
  for (const Instruction* instr : combiner.MakePostOrder()) {
    llvm::Value* v = nullptr;
    switch (instr->opcode()) {
      case Opcode::kParameter:
        v = instr->parameter_number() == 0 ? a : b;
        break;
      case Opcode::kConstant: {
        llvm::Type* t = WithWidth(RegisterType(b_.getContext(), instr->dtype()), width);
        const Literal& lit = instr->literal();
        v = ScalarConstant(t, lit);
        break;
      }
      case Opcode::kSelect:
        v = b_.CreateSelect(values.at(instr->operand(0)), values.at(instr->operand(1)),
                            values.at(instr->operand(2)));
        break;
      case Opcode::kFma:
        v = b_.CreateIntrinsic(llvm::Intrinsic::fma, {values.at(instr->operand(0))->getType()},
                               {values.at(instr->operand(0)), values.at(instr->operand(1)),
                                values.at(instr->operand(2))});
        break;
      default:
        if (!IsElementwise(instr->opcode())) {
          ThrowUnimplemented("codegen: reduction combiner with ", OpcodeName(instr->opcode()));
        }
        if (instr->operand_count() == 1) {
          v = EmitUnaryOp(instr->opcode(), instr->operand(0)->dtype(), instr->dtype(),
                          values.at(instr->operand(0)));
        } else {
          v = EmitBinaryOp(instr->opcode(), instr->operand(0)->dtype(), instr->direction(),
                           values.at(instr->operand(0)), values.at(instr->operand(1)));
        }
    }
    values[instr] = v;
  }
  return values.at(combiner.root());
}

llvm::Value* ElementalEmitter::HorizontalCombine(const Computation& combiner, llvm::Value* v) {
  auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(v->getType());
  if (!vt) return v;
  // Pairwise tree: halves the vector with shuffles, keeping the combiner vectorised.
  unsigned n = vt->getNumElements();
  while (n > 1 && n % 2 == 0) {
    std::vector<int> lo, hi;
    for (unsigned i = 0; i < n / 2; ++i) {
      lo.push_back(i);
      hi.push_back(i + n / 2);
    }
    llvm::Value* a = b_.CreateShuffleVector(v, lo);
    llvm::Value* c = b_.CreateShuffleVector(v, hi);
    v = EmitCombiner(combiner, a, c);
    n /= 2;
  }
  llvm::Value* acc = b_.CreateExtractElement(v, uint64_t{0});
  for (unsigned i = 1; i < n; ++i) acc = EmitCombiner(combiner, acc, b_.CreateExtractElement(v, i));
  return acc;
}

std::vector<llvm::Value*> ElementalEmitter::ForLoop(llvm::Value* start, llvm::Value* end,
                                                    int64_t step,
                                                    const std::vector<llvm::Value*>& init,
                                                    const LoopBody& body, const char* name,
                                                    LoopHints hints) {
  // A while loop whose first carried value is i.
  std::vector<llvm::Value*> with_i = {start};
  with_i.insert(with_i.end(), init.begin(), init.end());
  auto below_end = [&](const std::vector<llvm::Value*>& cur) {
    cur[0]->setName(name);  // i, named as the loop (the IR's readers look for it)
    return b_.CreateICmpSLT(cur[0], end);
  };
  auto step_body = [&](const std::vector<llvm::Value*>& cur) {
    std::vector<llvm::Value*> next = body(cur[0], {cur.begin() + 1, cur.end()});
    FJ_CHECK(next.size() + 1 == cur.size());
    next.insert(next.begin(), b_.CreateAdd(cur[0], b_.getInt64(step), "", /*HasNUW=*/true, /*HasNSW=*/true));
    return next;
  };
  std::vector<llvm::Value*> out = WhileLoop(with_i, below_end, step_body, name, hints);
  return {out.begin() + 1, out.end()};
}

std::vector<llvm::Value*> ElementalEmitter::WhileLoop(const std::vector<llvm::Value*>& init, const WhileCond& cond,
                                                      const WhileBody& body, const char* name, LoopHints hints) {
  llvm::Function* fn = b_.GetInsertBlock()->getParent();
  llvm::LLVMContext& ctx = b_.getContext();
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  llvm::BasicBlock* header = llvm::BasicBlock::Create(ctx, std::string(name) + ".header", fn);
  llvm::BasicBlock* body_bb = llvm::BasicBlock::Create(ctx, std::string(name) + ".body", fn);
  llvm::BasicBlock* exit = llvm::BasicBlock::Create(ctx, std::string(name) + ".exit", fn);
  b_.CreateBr(header);

  b_.SetInsertPoint(header);
  std::vector<llvm::PHINode*> carried;
  std::vector<llvm::Value*> carried_values;
  for (llvm::Value* v : init) {
    llvm::PHINode* phi = b_.CreatePHI(v->getType(), 2);
    phi->addIncoming(v, pre);
    carried.push_back(phi);
    carried_values.push_back(phi);
  }
  PushScope();
  llvm::Value* go = cond(carried_values);
  PopScope();
  b_.CreateCondBr(go, body_bb, exit);

  b_.SetInsertPoint(body_bb);
  PushScope();
  std::vector<llvm::Value*> next = body(carried_values);
  PopScope();
  FJ_CHECK(next.size() == carried.size());
  llvm::BasicBlock* latch = b_.GetInsertBlock();
  llvm::BranchInst* back = b_.CreateBr(header);
  if (hints.unroll != 0 || !hints.vectorize) {
    // !llvm.loop !{self, hints...}
    std::vector<llvm::Metadata*> md = {nullptr};
    auto hint = [&](const char* key, llvm::Metadata* value) {
      std::vector<llvm::Metadata*> kv = {llvm::MDString::get(ctx, key)};
      if (value) kv.push_back(value);
      md.push_back(llvm::MDNode::get(ctx, kv));
    };
    if (!hints.vectorize) hint("llvm.loop.vectorize.enable", llvm::ConstantAsMetadata::get(b_.getFalse()));
    if (hints.unroll == 1) hint("llvm.loop.unroll.disable", nullptr);
    if (hints.unroll > 1) hint("llvm.loop.unroll.count", llvm::ConstantAsMetadata::get(b_.getInt32(hints.unroll)));
    llvm::MDNode* loop = llvm::MDNode::getDistinct(ctx, md);
    loop->replaceOperandWith(0, loop);
    back->setMetadata(llvm::LLVMContext::MD_loop, loop);
  }
  for (size_t k = 0; k < carried.size(); ++k) carried[k]->addIncoming(next[k], latch);

  b_.SetInsertPoint(exit);
  return carried_values;
}

Val ElementalEmitter::EmitReduce(const Instruction* instr, const Index& index) {
  const Instruction* x = instr->operand(0);
  const Computation& combiner = *instr->to_apply();
  const std::vector<int64_t>& rdims = instr->dimensions();
  const std::vector<int64_t>& in_dims = x->shape().dims();
  Val init = Emit(instr->operand(1), Index{});
  auto visit = [&](const Index& at) {
    if (instr == visited_reduce_) reduce_visitor_(at, width_);
  };
  if (rdims.empty()) {
    // Nothing reduced: combine the init with each element once.
    Index sub = index;
    Val v = Emit(x, sub);
    Val i = init;
    Lanes().Unify(i, v);
    return {EmitCombiner(combiner, i.v, v.v), v.varying};
  }
  // Operand index: kept dims from the output index, reduced dims from the loops.
  Index sub;
  sub.dims.resize(in_dims.size());
  size_t out_k = 0;
  for (size_t k = 0; k < in_dims.size(); ++k) {
    if (!Contains(rdims, k)) sub.dims[k] = index.dims[out_k++];
  }
  bool out_varying = false;
  for (const IndexDim& d : index.dims) out_varying = out_varying || !d.uniform();
  int64_t last = rdims.back();
  int64_t inner_size = in_dims[last];
  // A row reduction over uniform outputs: vectorise the innermost reduced dimension, with
  // several independent accumulators so that the combiner's latency does not serialise it.
  int vw = reduction_width_;
  bool vector_inner = vw > 1 && !out_varying && last == static_cast<int64_t>(in_dims.size()) - 1 &&
                      inner_size >= ShortRowLanes(vw);
  int unroll = 1;
  while (unroll < 4 && inner_size >= 2 * unroll * vw) unroll *= 2;
  // A GPU warp's lanes take this reduction together: only at a warp-uniform point (never
  // inside another cooperative loop, where lanes run different trip counts).
  bool cooperative = warp_ && !in_lane_loop_ && !out_varying && width_ == 1 &&
                     std::find(cooperative_.begin(), cooperative_.end(), instr) != cooperative_.end();

  llvm::Value* acc0 = out_varying ? Widen(init) : init.v;
  // Loops over all reduced dims but the last carry the accumulator in `acc0`'s form.
  std::function<llvm::Value*(size_t, Index&, llvm::Value*)> loop_dims;
  loop_dims = [&](size_t r, Index& idx, llvm::Value* acc) -> llvm::Value* {
    LaneMath lanes = Lanes();
    int64_t d = rdims[r];
    if (r + 1 < rdims.size()) {
      return ForLoop(b_.getInt64(0), b_.getInt64(in_dims[d]), 1, {acc},
                     [&](llvm::Value* i, const std::vector<llvm::Value*>& c) {
                       idx.dims[d] = lanes.Uniform(i);
                       return std::vector<llvm::Value*>{loop_dims(r + 1, idx, c[0])};
                     }, "reduce")[0];
    }
    auto scalar_loop = [&](llvm::Value* start, llvm::Value* a) {
      return ForLoop(start, b_.getInt64(in_dims[d]), 1, {a},
                     [&](llvm::Value* i, const std::vector<llvm::Value*>& c) {
                       LaneMath l = Lanes();
                       idx.dims[d] = l.Uniform(i);
                       Val v = Emit(x, idx);
                       visit(idx);
                       Val cur{c[0], c[0]->getType()->isVectorTy()};
                       l.Unify(cur, v);
                       return std::vector<llvm::Value*>{EmitCombiner(combiner, cur.v, v.v)};
                     }, "reduce")[0];
    };
    if (cooperative) {
      bool saved = in_lane_loop_;
      in_lane_loop_ = true;
      llvm::Value* lane_acc = ForLoop(warp_->lane, b_.getInt64(in_dims[d]), warp_->lanes, {acc},
                                      [&](llvm::Value* i, const std::vector<llvm::Value*>& c) {
                                        idx.dims[d] = Lanes().Uniform(i);
                                        Val v = Emit(x, idx);
                                        visit(idx);
                                        return std::vector<llvm::Value*>{EmitCombiner(combiner, c[0], v.v)};
                                      }, "reduce.lanes")[0];
      in_lane_loop_ = saved;
      return lane_acc;
    }
    if (!vector_inner) return scalar_loop(b_.getInt64(0), acc);
    int64_t step = static_cast<int64_t>(vw) * unroll;
    int64_t vec_end = inner_size - inner_size % step;
    const int64_t whole_end = inner_size - inner_size % vw;
    llvm::Value* folded;
    {
      WidthScope wide(*this, vw);
      LaneMath vl = Lanes();
      std::vector<llvm::Value*> init_accs(unroll, vl.Splat(init.v));
      std::vector<llvm::Value*> accs = ForLoop(
          b_.getInt64(0), b_.getInt64(vec_end), step, init_accs,
          [&](llvm::Value* i, const std::vector<llvm::Value*>& c) {
            std::vector<llvm::Value*> next;
            for (int u = 0; u < unroll; ++u) {
              idx.dims[d] = vl.LaneRamp(b_.CreateAdd(i, b_.getInt64(static_cast<int64_t>(u) * vw)));
              Val v = Emit(x, idx);
              visit(idx);
              next.push_back(EmitCombiner(combiner, c[u], vl.Widen(v)));
            }
            return next;
          }, "reduce.vec");
      // The whole vectors the unrolled steps leave (rows of 48 on 16 lanes: the third)
      // join the first accumulator. (They went to the scalar loop: a row reduction over
      // rows of 40 or 48 after a tanh took 3-5x as long as over rows of 64.)
      if (whole_end > vec_end) {
        accs[0] = ForLoop(b_.getInt64(vec_end), b_.getInt64(whole_end), vw, {accs[0]},
                          [&](llvm::Value* i, const std::vector<llvm::Value*>& c) {
                            idx.dims[d] = vl.LaneRamp(i);
                            Val v = Emit(x, idx);
                            visit(idx);
                            return std::vector<llvm::Value*>{EmitCombiner(combiner, c[0], vl.Widen(v))};
                          }, "reduce.vec.rest")[0];
      }
      llvm::Value* vacc = accs[0];
      for (int u = 1; u < unroll; ++u) vacc = EmitCombiner(combiner, vacc, accs[u]);
      folded = EmitCombiner(combiner, acc, HorizontalCombine(combiner, vacc));
    }
    if (whole_end == inner_size) return folded;
    WidthScope scalar(*this, 1);
    return scalar_loop(b_.getInt64(whole_end), folded);
  };
  llvm::Value* result = loop_dims(0, sub, acc0);
  if (cooperative) {
    // Butterfly: after log2(lanes) exchanges every lane holds the combination of all.
    for (int mask = warp_->lanes / 2; mask >= 1; mask /= 2) {
      result = EmitCombiner(combiner, result, warp_->shuffle_xor(b_, result, mask));
    }
  }
  return {result, out_varying};
}

Val ElementalEmitter::EmitArgReduce(const Instruction* instr, const Index& index) {
  const Instruction* x = instr->operand(0);
  int64_t axis = instr->dimensions()[0];
  bool is_max = instr->opcode() == Opcode::kArgMax;
  DType t = x->dtype();
  Index sub;
  size_t out_k = 0;
  for (int k = 0; k < x->shape().rank(); ++k) {
    sub.dims.push_back(k == axis ? Lanes().Constant(0) : index.dims[out_k++]);
  }
  bool varying = false;
  for (const IndexDim& d : index.dims) varying = varying || !d.uniform();
  Val first = Emit(x, sub);
  llvm::Value* best = varying ? Widen(first) : first.v;
  llvm::Type* idx_type = varying ? WithWidth(b_.getInt64Ty(), width_) : b_.getInt64Ty();
  llvm::Value* best_i = llvm::ConstantInt::get(idx_type, 0);
  std::vector<llvm::Value*> out = ForLoop(
      b_.getInt64(1), b_.getInt64(x->shape().dim(axis)), 1, {best, best_i},
      [&](llvm::Value* i, const std::vector<llvm::Value*>& c) {
        LaneMath lanes = Lanes();
        sub.dims[axis] = lanes.Uniform(i);
        Val v = Emit(x, sub);
        llvm::Value* val = varying ? Widen(v) : v.v;
        llvm::Value* take;
        if (IsFloat(t)) {
          // First NaN wins; otherwise the first strict improvement.
          take = is_max ? b_.CreateFCmpOGT(val, c[0]) : b_.CreateFCmpOLT(val, c[0]);
          llvm::Value* new_nan = b_.CreateAnd(b_.CreateFCmpUNO(val, val), b_.CreateFCmpORD(c[0], c[0]));
          take = b_.CreateOr(take, new_nan);
        } else {
          DType ct = IsPred(t) ? DType::kU32 : t;
          take = EmitBinaryOp(Opcode::kCompare, ct, is_max ? ComparisonDirection::kGt : ComparisonDirection::kLt,
                              val, c[0]);
        }
        llvm::Value* iv = varying ? lanes.Splat(i) : i;
        return std::vector<llvm::Value*>{b_.CreateSelect(take, val, c[0]), b_.CreateSelect(take, iv, c[1])};
      },
      "argreduce");
  llvm::Type* out_type = WithWidth(RegisterType(b_.getContext(), instr->dtype()), varying ? width_ : 1);
  return {b_.CreateTrunc(out[1], out_type), varying};
}

Val ElementalEmitter::EmitDot(const Instruction* instr, const Index& index) {
  const Instruction* lhs = instr->operand(0);
  const Instruction* rhs = instr->operand(1);
  const DotDims& dd = instr->attrs().dot;
  DType t = instr->dtype();
  auto free_dims = [](int rank, const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
    std::vector<int64_t> f;
    for (int i = 0; i < rank; ++i) {
      if (!Contains(a, i) && !Contains(b, i)) f.push_back(i);
    }
    return f;
  };
  std::vector<int64_t> lfree = free_dims(lhs->shape().rank(), dd.lhs_batch, dd.lhs_contracting);
  std::vector<int64_t> rfree = free_dims(rhs->shape().rank(), dd.rhs_batch, dd.rhs_contracting);
  Index li, ri;
  li.dims.resize(lhs->shape().rank());
  ri.dims.resize(rhs->shape().rank());
  size_t p = 0;
  for (size_t k = 0; k < dd.lhs_batch.size(); ++k, ++p) {
    li.dims[dd.lhs_batch[k]] = index.dims[p];
    ri.dims[dd.rhs_batch[k]] = index.dims[p];
  }
  for (int64_t f : lfree) li.dims[f] = index.dims[p++];
  for (int64_t f : rfree) ri.dims[f] = index.dims[p++];
  bool varying = false;
  for (const IndexDim& d : index.dims) varying = varying || !d.uniform();
  llvm::Type* type = WithWidth(RegisterType(b_.getContext(), t), varying ? width_ : 1);
  std::function<llvm::Value*(size_t, llvm::Value*)> loop = [&](size_t c, llvm::Value* acc) -> llvm::Value* {
    if (c == dd.lhs_contracting.size()) {
      Val l = Emit(lhs, li), r = Emit(rhs, ri);
      llvm::Value* lv = varying ? Widen(l) : l.v;
      llvm::Value* rv = varying ? Widen(r) : r.v;
      if (IsPred(t)) return b_.CreateOr(acc, b_.CreateAnd(lv, rv));
      if (IsFloat(t)) return b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {lv->getType()}, {lv, rv, acc});
      return b_.CreateAdd(acc, b_.CreateMul(lv, rv));
    }
    int64_t n = lhs->shape().dim(dd.lhs_contracting[c]);
    return ForLoop(b_.getInt64(0), b_.getInt64(n), 1, {acc},
                   [&](llvm::Value* i, const std::vector<llvm::Value*>& cur) {
                     li.dims[dd.lhs_contracting[c]] = Lanes().Uniform(i);
                     ri.dims[dd.rhs_contracting[c]] = Lanes().Uniform(i);
                     return std::vector<llvm::Value*>{loop(c + 1, cur[0])};
                   }, "dot")[0];
  };
  return {loop(0, ConstantOf(type, 0)), varying};
}

}  // namespace fj::codegen
