// The elemental emitter (see elemental.h): element arithmetic and lazy selects; data
// movement is in elemental_indexing.cc, loops over operands in elemental_loops.cc. Integer
// semantics follow XLA and are defined for every input: x / 0 == -1, x % 0 == x,
// INT_MIN / -1 == INT_MIN, shifts by the bit width or more give 0 (arithmetic right
// shifts: the sign), float -> int conversion saturates (NaN -> 0). maximum/minimum follow
// NumPy: NaN propagates, ties return the first operand.
#include "codegen/elemental.h"

#include <algorithm>
#include <cmath>

#include <unordered_set>

#include "analysis/cost_model.h"
#include "codegen/math.h"
#include "llvm/IR/Intrinsics.h"
#include "support/error.h"
#include "support/float16.h"

namespace fj::codegen {
namespace {

llvm::Value* AllOnes(llvm::Type* t) { return llvm::Constant::getAllOnesValue(t); }

}  // namespace

bool Index::operator==(const Index& o) const { return dims == o.dims && linear == o.linear; }

IndexDim LinearIndex(LaneMath& lanes, const Index& index, const std::vector<int64_t>& dims) {
  if (index.linear) return *index.linear;
  FJ_CHECK(index.dims.size() == dims.size(), "index rank ", index.dims.size(), " vs ", dims.size());
  std::vector<int64_t> strides = RowMajorStrides(dims);
  IndexDim linear = lanes.Constant(0);
  bool first = true;
  for (size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] == 1) continue;
    IndexDim term = lanes.MulConst(index.dims[k], strides[k]);
    linear = first ? term : lanes.Add(linear, term);
    first = false;
  }
  return linear;
}

Index MultiIndex(LaneMath& lanes, const IndexDim& linear, const std::vector<int64_t>& dims) {
  Index index;
  if (std::count(dims.begin(), dims.end(), 0) > 0) {
    // No element has a position: the code reading one never runs (a kernel over [0, 0, 0, 0]
    // divided by the zero strides of its transpose's operand as it was compiled: SIGFPE).
    for (size_t d = 0; d < dims.size(); ++d) index.dims.push_back(lanes.Constant(0));
    return index;
  }
  std::vector<int64_t> strides = RowMajorStrides(dims);
  // The outermost dimension of more than one element needs no remainder (the position is
  // below the size), so [1, ..., 1, n] keeps the linear position as it is (a ramp of lanes
  // stays a ramp: vector loads, not gathers).
  size_t outer = 0;
  while (outer < dims.size() && dims[outer] == 1) ++outer;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 1) {
      index.dims.push_back(lanes.Constant(0));
      continue;
    }
    // Positions of the shape's elements: below its size (and the quotients below theirs).
    int64_t size = strides.empty() ? 1 : strides[0] * dims[0];
    IndexDim q = strides[d] == 1 ? linear : lanes.DivConst(linear, strides[d], size);
    index.dims.push_back(d == outer ? q : lanes.RemConst(q, dims[d], size / strides[d]));
  }
  return index;
}

ElementalEmitter::ElementalEmitter(Builder& b, BufferReader reader, int width, int reduction_width)
    : b_(b), reader_(std::move(reader)), width_(width), reduction_width_(reduction_width) {
  scopes_.emplace_back();
}

Val ElementalEmitter::Emit(const Instruction* instr, const Index& index) {
  for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope) {
    auto it = scope->find(instr);
    if (it == scope->end()) continue;
    for (const CacheEntry& e : it->second) {
      // A uniform value (one scalar for all lanes) serves any width.
      if ((e.width == width_ || !e.value.varying) && e.index == index) return e.value;
    }
  }
  if (auto kept = row_values_.find(instr); kept != row_values_.end()) {
    const RowValue& row = kept->second;
    bool in_row = !index.linear && index.dims.size() == row.outer.size() + 1;
    for (size_t k = 0; in_row && k < row.outer.size(); ++k) {
      in_row = index.dims[k] == row.outer[k];
    }
    if (in_row) return row.read(index.dims.back(), width_);
  }
  if (auto kept = lane_rows_.find(instr); kept != lane_rows_.end()) {
    if (std::optional<Val> v = kept->second(index, width_)) return *v;
  }
  Val v = EmitUncached(instr, index);
  scopes_.back()[instr].push_back({width_, index, v});
  return v;
}

llvm::Value* ElementalEmitter::ToI64(const Val& v, DType t) {
  llvm::Type* i64 = b_.getInt64Ty();
  llvm::Type* target = v.varying ? WithWidth(i64, width_) : i64;
  return IsSignedInt(t) ? b_.CreateSExtOrTrunc(v.v, target) : b_.CreateZExtOrTrunc(v.v, target);
}

Val ElementalEmitter::EmitUncached(const Instruction* instr, const Index& given) {
  LaneMath lanes = Lanes();
  Opcode op = instr->opcode();
  // Ops that move elements need a multi-dimensional index; a kernel walking its output by
  // linear position hands one only to ops that keep positions (elementwise, reshape).
  bool keeps_positions = IsElementwise(op) || op == Opcode::kParameter || op == Opcode::kConstant ||
                         op == Opcode::kReshape || op == Opcode::kIota ||
                         (op == Opcode::kBroadcast && instr->operand(0)->shape().NumElements() == 1);
  bool derive = given.linear && !keeps_positions && instr->shape().IsArray();
  Index derived;
  if (derive) derived = MultiIndex(lanes, *given.linear, instr->shape().dims());
  const Index& index = derive ? derived : given;
  if (!index.linear && instr->shape().IsArray() && static_cast<int>(index.dims.size()) != instr->shape().rank()) {
    ThrowInternal("codegen: ", instr->name(), " ", instr->shape().ToString(), " indexed with ", index.dims.size(),
                  " dimensions");
  }
  switch (op) {
    case Opcode::kParameter:
      return reader_(instr, index, width_);
    case Opcode::kConstant: {
      if (instr->shape().NumElements() == 1) {
        const Literal& lit = instr->literal();
        llvm::Type* t = RegisterType(b_.getContext(), lit.dtype());
        return {ScalarConstant(t, lit), false};
      }
      return reader_(instr, index, width_);
    }
    case Opcode::kIota:
      return EmitIota(instr, index);
    case Opcode::kBroadcast: {
      const Instruction* x = instr->operand(0);
      Index sub;
      if (x->shape().NumElements() == 1) {  // a scalar broadcast reads one element
        sub.dims.assign(x->shape().rank(), lanes.Constant(0));
        return Emit(x, sub);
      }
      for (int k = 0; k < x->shape().rank(); ++k) {
        sub.dims.push_back(x->shape().dim(k) == 1 ? lanes.Constant(0)
                                                  : index.dims[instr->dimensions()[k]]);
      }
      return Emit(x, sub);
    }
    case Opcode::kReshape:
      return EmitReshape(instr, index);
    case Opcode::kTranspose: {
      const std::vector<int64_t>& perm = instr->dimensions();
      Index sub;
      sub.dims.resize(perm.size());
      for (size_t k = 0; k < perm.size(); ++k) sub.dims[perm[k]] = index.dims[k];
      return Emit(instr->operand(0), sub);
    }
    case Opcode::kReverse: {
      Index sub = index;
      for (int64_t d : instr->dimensions()) {
        // size - 1 - i
        sub.dims[d] = lanes.AddConst(lanes.MulConst(index.dims[d], -1), instr->shape().dim(d) - 1);
      }
      return Emit(instr->operand(0), sub);
    }
    case Opcode::kSlice: {
      const SliceConfig& s = instr->attrs().slice;
      Index sub;
      for (size_t k = 0; k < s.starts.size(); ++k) {
        sub.dims.push_back(lanes.AddConst(lanes.MulConst(index.dims[k], s.strides[k]), s.starts[k]));
      }
      return Emit(instr->operand(0), sub);
    }
    case Opcode::kConcatenate:
      return EmitConcatenate(instr, index);
    case Opcode::kPad:
      return EmitPad(instr, index);
    case Opcode::kDynamicSlice:
      return EmitDynamicSlice(instr, index);
    case Opcode::kGather:
      return EmitGather(instr, index);
    case Opcode::kDynamicUpdateSlice:
      return EmitDynamicUpdateSlice(instr, index);
    case Opcode::kReduce:
      return EmitReduce(instr, index);
    case Opcode::kArgMax:
    case Opcode::kArgMin:
      return EmitArgReduce(instr, index);
    case Opcode::kDot:
      return EmitDot(instr, index);
    default:
      if (IsElementwise(instr->opcode())) return EmitElementwise(instr, index);
      ThrowUnimplemented("codegen: no elemental rule for ", OpcodeName(instr->opcode()));
  }
}

Val ElementalEmitter::EmitElementwise(const Instruction* instr, const Index& index) {
  if (instr->opcode() == Opcode::kSelect) {
    if (int lazy = LazySelectOperand(instr)) return EmitLazySelect(instr, index, lazy);
  }
  std::vector<Val> ops;
  bool varying = false;
  for (const Instruction* op : instr->operands()) {
    // Clamp bounds may be scalars broadcast implicitly.
    Index sub = (op->shape().IsScalar() && !instr->shape().IsScalar()) ? Index{} : index;
    ops.push_back(Emit(op, sub));
    varying = varying || ops.back().varying;
  }
  if (varying) {
    for (Val& v : ops) v = {Widen(v), true};
  }
  Opcode op = instr->opcode();
  DType in = instr->operand(0)->dtype();
  if (op == Opcode::kSelect) {
    return {b_.CreateSelect(ops[0].v, ops[1].v, ops[2].v), varying};
  }
  if (op == Opcode::kClamp) {
    DType t = instr->dtype();
    llvm::Value* v = EmitBinaryOp(Opcode::kMaximum, t, {}, ops[1].v, ops[0].v);
    return {EmitBinaryOp(Opcode::kMinimum, t, {}, v, ops[2].v), varying};
  }
  if (op == Opcode::kFma) {
    return {b_.CreateIntrinsic(llvm::Intrinsic::fma, {ops[0].v->getType()},
                               {ops[0].v, ops[1].v, ops[2].v}),
            varying};
  }
  if (ops.size() == 1) return {EmitUnaryOp(op, in, instr->dtype(), ops[0].v), varying};
  return {EmitBinaryOp(op, in, instr->direction(), ops[0].v, ops[1].v), varying};
}

// Work (ElementCost units) an operand of a select must save to be computed lazily: more
// than a branch on the predicate's lanes costs, about a third of a threefry block.
constexpr double kLazySelectCost = 30;

const std::unordered_set<const Instruction*>& ElementalEmitter::GuardedBy(const Instruction* pred, int k) {
  auto key = std::make_pair(pred, k);
  if (auto it = guarded_.find(key); it != guarded_.end()) return it->second;
  // Users first: a value is guarded when each of its users is guarded, or is a select on
  // `pred` that reads it as operand k only.
  std::unordered_set<const Instruction*>& guarded = guarded_[key];
  std::vector<Instruction*> order = pred->parent()->MakePostOrder();
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const Instruction* n = *it;
    Opcode o = n->opcode();
    if (n->users().empty() || o == Opcode::kParameter || o == Opcode::kConstant) continue;
    bool all = true;
    for (const Instruction* u : n->users()) {
      bool takes = u->opcode() == Opcode::kSelect && u->operand(0) == pred && u->operand(k) == n &&
                   u->operand(0) != n && u->operand(3 - k) != n;
      all = all && (takes || guarded.count(u) > 0);
    }
    if (all) guarded.insert(n);
  }
  return guarded;
}

int ElementalEmitter::LazySelectOperand(const Instruction* select) {
  if (auto it = lazy_selects_.find(select); it != lazy_selects_.end()) return it->second;
  int lazy = 0;
  if (select->shape().IsArray() && select->operand(0)->shape().SameDims(select->shape())) {
    for (int k = 1; k <= 2 && !lazy; ++k) {
      const std::unordered_set<const Instruction*>& guarded = GuardedBy(select->operand(0), k);
      const Instruction* top = select->operand(k);
      if (!guarded.count(top)) continue;
      // The guarded ops this operand computes.
      double cost = 0;
      bool simple = true;
      std::unordered_set<const Instruction*> seen = {top};
      std::vector<const Instruction*> work = {top};
      while (!work.empty()) {
        const Instruction* n = work.back();
        work.pop_back();
        cost += ElementCost(*n);
        // Reductions (shuffles across a GPU warp) and loops of their own stay unconditional.
        Opcode o = n->opcode();
        simple = simple && o != Opcode::kReduce && o != Opcode::kArgMax && o != Opcode::kArgMin && o != Opcode::kDot &&
                 o != Opcode::kCustomCall && o != Opcode::kFusion;
        for (const Instruction* op : n->operands()) {
          if (guarded.count(op) && seen.insert(op).second) work.push_back(op);
        }
      }
      if (simple && cost >= kLazySelectCost) lazy = k;
    }
  }
  lazy_selects_[select] = lazy;
  return lazy;
}

std::vector<const Instruction*> ElementalEmitter::SharedLazyInputs(const Instruction* select, int lazy) {
  // Down the lazy operand's guarded ops that read their operands at their own index: the
  // operands that are not guarded, have the select's shape, and whose every user reads them
  // at its own index (elementwise ops of that shape), so that they are needed at this index.
  const std::unordered_set<const Instruction*>& guarded = GuardedBy(select->operand(0), lazy);
  const Shape& shape = select->shape();
  auto at_own_index = [&](const Instruction* i) {
    return IsElementwise(i->opcode()) && i->shape().SameDims(shape);
  };
  std::vector<const Instruction*> shared;
  std::unordered_set<const Instruction*> seen = {select->operand(lazy)};
  std::vector<const Instruction*> work = {select->operand(lazy)};
  while (!work.empty()) {
    const Instruction* n = work.back();
    work.pop_back();
    if (!at_own_index(n)) continue;
    for (const Instruction* op : n->operands()) {
      if (!seen.insert(op).second || op->opcode() == Opcode::kConstant || op->opcode() == Opcode::kParameter) continue;
      if (guarded.count(op)) {
        work.push_back(op);
      } else if (op->shape().SameDims(shape) &&
                 std::all_of(op->users().begin(), op->users().end(), at_own_index)) {
        shared.push_back(op);
      }
    }
  }
  return shared;
}

Val ElementalEmitter::EmitLazySelect(const Instruction* select, const Index& index, int lazy) {
  Val p = Emit(select->operand(0), index);
  Val other = Emit(select->operand(3 - lazy), index);
  // The values the lazy operand reads at this index that other users need as well: computed
  // inside the branch they would go with its scope and be computed again after it.
  for (const Instruction* shared : SharedLazyInputs(select, lazy)) Emit(shared, index);
  // Whether some lane takes the lazy operand.
  llvm::Value* take = lazy == 1 ? p.v : b_.CreateNot(p.v);
  llvm::Value* any = take->getType()->isVectorTy() ? b_.CreateOrReduce(take) : take;
  llvm::Function* fn = b_.GetInsertBlock()->getParent();
  llvm::LLVMContext& ctx = b_.getContext();
  llvm::BasicBlock* before = b_.GetInsertBlock();
  llvm::BasicBlock* compute = llvm::BasicBlock::Create(ctx, "lazy.select", fn);
  llvm::BasicBlock* merge = llvm::BasicBlock::Create(ctx, "lazy.select.done", fn);
  b_.CreateCondBr(any, compute, merge);
  b_.SetInsertPoint(compute);
  PushScope();  // what is computed here is not there on the other path
  Val v = Emit(select->operand(lazy), index);
  bool varying = p.varying || other.varying || v.varying;
  llvm::Value* value = varying ? Widen(v) : v.v;
  PopScope();
  llvm::BasicBlock* computed = b_.GetInsertBlock();
  b_.CreateBr(merge);
  b_.SetInsertPoint(merge);
  llvm::PHINode* phi = b_.CreatePHI(value->getType(), 2);
  phi->addIncoming(value, computed);
  phi->addIncoming(llvm::Constant::getNullValue(value->getType()), before);
  llvm::Value* pv = varying ? Widen(p) : p.v;
  llvm::Value* ov = varying ? Widen(other) : other.v;
  return {lazy == 1 ? b_.CreateSelect(pv, phi, ov) : b_.CreateSelect(pv, ov, phi), varying};
}

llvm::Value* ElementalEmitter::EmitUnaryOp(Opcode op, DType in, DType out, llvm::Value* x) {
  llvm::Type* type = x->getType();
  llvm::LLVMContext& ctx = b_.getContext();
  int width = type->isVectorTy() ? static_cast<int>(llvm::cast<llvm::FixedVectorType>(type)->getNumElements()) : 1;
  if (op == Opcode::kConvert && (IsLowPrecisionFloat(in) || IsLowPrecisionFloat(out))) {
    return EmitLowPrecisionConvert(x, in, out);
  }
  if (IsLowPrecisionFloat(in) && op != Opcode::kCopy && op != Opcode::kBitcastConvert) {
    ThrowInternal("codegen: ", OpcodeName(op), " on ", DTypeName(in), " (the low-precision pass computes it in f32)");
  }
  auto unary_intrinsic = [&](llvm::Intrinsic::ID id) { return b_.CreateUnaryIntrinsic(id, x); };
  switch (op) {
    case Opcode::kNegate:
      return IsFloat(in) ? b_.CreateFNeg(x) : b_.CreateNeg(x);
    case Opcode::kAbs:
      if (IsFloat(in)) return unary_intrinsic(llvm::Intrinsic::fabs);
      if (IsUnsignedInt(in)) return x;
      return b_.CreateBinaryIntrinsic(llvm::Intrinsic::abs, x, b_.getFalse());
    case Opcode::kSign: {
      if (IsFloat(in)) {
        llvm::Value* pos = b_.CreateFCmpOGT(x, ConstantOf(type, 0));
        llvm::Value* neg = b_.CreateFCmpOLT(x, ConstantOf(type, 0));
        return b_.CreateSelect(pos, ConstantOf(type, 1), b_.CreateSelect(neg, ConstantOf(type, -1), x));
      }
      if (IsUnsignedInt(in)) return b_.CreateZExt(b_.CreateICmpNE(x, ConstantOf(type, 0)), type);
      llvm::Value* pos = b_.CreateZExt(b_.CreateICmpSGT(x, ConstantOf(type, 0)), type);
      llvm::Value* neg = b_.CreateZExt(b_.CreateICmpSLT(x, ConstantOf(type, 0)), type);
      return b_.CreateSub(pos, neg);
    }
    case Opcode::kNot:
      return b_.CreateXor(x, AllOnes(type));
    case Opcode::kFloor: return unary_intrinsic(llvm::Intrinsic::floor);
    case Opcode::kCeil: return unary_intrinsic(llvm::Intrinsic::ceil);
    case Opcode::kRoundNearestEven: return unary_intrinsic(llvm::Intrinsic::roundeven);
    case Opcode::kRoundNearestAfz: {
      // trunc(x), one step further from zero where x's fraction is at least a half. (Not
      // llvm.round: x86 has no vector instruction for it and would call roundf per lane.)
      llvm::Value* t = unary_intrinsic(llvm::Intrinsic::trunc);
      llvm::Value* frac = b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, b_.CreateFSub(x, t));
      llvm::Value* step = b_.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, ConstantOf(type, 1), x);
      return b_.CreateSelect(b_.CreateFCmpOGE(frac, ConstantOf(type, 0.5)), b_.CreateFAdd(t, step), t);
    }
    case Opcode::kSqrt: return unary_intrinsic(llvm::Intrinsic::sqrt);
    case Opcode::kRsqrt: return b_.CreateFDiv(ConstantOf(type, 1), unary_intrinsic(llvm::Intrinsic::sqrt));
    case Opcode::kExp: return EmitExp(b_, x);
    case Opcode::kExpm1: return EmitExpm1(b_, x);
    case Opcode::kLog: return EmitLog(b_, x);
    case Opcode::kLog1p: return EmitLog1p(b_, x);
    case Opcode::kSin: return EmitSin(b_, x);
    case Opcode::kCos: return EmitCos(b_, x);
    case Opcode::kTan: return EmitTan(b_, x);
    case Opcode::kTanh: return EmitTanh(b_, x);
    case Opcode::kIsFinite: {
      llvm::Value* a = unary_intrinsic(llvm::Intrinsic::fabs);
      return b_.CreateFCmpONE(a, llvm::ConstantFP::getInfinity(type));
    }
    case Opcode::kPopulationCount: return unary_intrinsic(llvm::Intrinsic::ctpop);
    case Opcode::kCopy: return x;
    case Opcode::kBitcastConvert:
      return b_.CreateBitCast(x, WithWidth(RegisterType(ctx, out), width));
    case Opcode::kConvert: {
      llvm::Type* to = WithWidth(RegisterType(ctx, out), width);
      if (in == out) return x;
      if (IsPred(out)) {
        return IsFloat(in) ? b_.CreateFCmpUNE(x, ConstantOf(type, 0)) : b_.CreateICmpNE(x, ConstantOf(type, 0));
      }
      if (IsPred(in)) return IsFloat(out) ? b_.CreateUIToFP(x, to) : b_.CreateZExt(x, to);
      if (IsFloat(in) && IsFloat(out)) return b_.CreateFPCast(x, to);
      if (IsFloat(out)) return IsSignedInt(in) ? b_.CreateSIToFP(x, to) : b_.CreateUIToFP(x, to);
      if (IsFloat(in)) return SaturatingFloatToInt(x, in, out, to);
      return IsSignedInt(in) ? b_.CreateSExtOrTrunc(x, to) : b_.CreateZExtOrTrunc(x, to);
    }
    default:
      ThrowUnimplemented("codegen: unary ", OpcodeName(op));
  }
}

llvm::Value* ElementalEmitter::EmitLowPrecisionConvert(llvm::Value* x, DType in, DType out) {
  if (in == out) return x;
  if (IsLowPrecisionFloat(in)) return EmitUnaryOp(Opcode::kConvert, DType::kF32, out, EmitToF32(x, in));
  llvm::Value* f = in == DType::kF32 ? x : EmitUnaryOp(Opcode::kConvert, in, DType::kF32, x);
  return EmitFromF32(f, out);
}

namespace {

// An integer or float type with `like`'s vector width.
llvm::Type* Like(llvm::Value* like, llvm::Type* scalar) {
  llvm::Type* t = like->getType();
  return t->isVectorTy() ? llvm::VectorType::get(scalar, llvm::cast<llvm::VectorType>(t)->getElementCount()) : scalar;
}

}  // namespace

llvm::Value* ElementalEmitter::EmitToF32(llvm::Value* bits, DType in) {
  using namespace half_bits;
  llvm::Type* i32 = Like(bits, b_.getInt32Ty());
  llvm::Type* f32 = Like(bits, b_.getFloatTy());
  auto c = [&](uint32_t v) { return llvm::ConstantInt::get(i32, v); };
  if (in == DType::kF16 && native_half_) return b_.CreateFPExt(b_.CreateBitCast(bits, Like(bits, b_.getHalfTy())), f32);
  llvm::Value* w = b_.CreateZExt(bits, i32);
  if (in == DType::kBF16) return b_.CreateBitCast(b_.CreateShl(w, 16), f32);
  llvm::Value* sign = b_.CreateShl(b_.CreateAnd(w, c(0x8000u)), 16);
  llvm::Value* em = b_.CreateAnd(w, c(0x7fffu));
  llvm::Value* special = b_.CreateOr(c(kF32Inf), b_.CreateShl(b_.CreateAnd(em, c(0x3ffu)), 13));
  llvm::Value* normal = b_.CreateAdd(b_.CreateShl(em, 13), c(kRebias));
  llvm::Value* sub = b_.CreateBitCast(
      b_.CreateFSub(b_.CreateBitCast(b_.CreateAdd(em, c(kHalf)), f32), llvm::ConstantFP::get(f32, 0.5)), i32);
  llvm::Value* out = b_.CreateSelect(b_.CreateICmpUGE(em, c(0x7c00u)), special,
                                     b_.CreateSelect(b_.CreateICmpUGE(em, c(0x400u)), normal, sub));
  return b_.CreateBitCast(b_.CreateOr(sign, out), f32);
}

llvm::Value* ElementalEmitter::EmitFromF32(llvm::Value* x, DType out) {
  using namespace half_bits;
  llvm::Type* i32 = Like(x, b_.getInt32Ty());
  llvm::Type* i16 = Like(x, b_.getInt16Ty());
  if (out == DType::kF16 && native_half_) return b_.CreateBitCast(b_.CreateFPTrunc(x, Like(x, b_.getHalfTy())), i16);
  auto c = [&](uint32_t v) { return llvm::ConstantInt::get(i32, v); };
  llvm::Value* bits = b_.CreateBitCast(x, i32);
  llvm::Value* a = b_.CreateAnd(bits, c(0x7fffffffu));
  llvm::Value* nan = b_.CreateICmpUGT(a, c(kF32Inf));
  if (out == DType::kBF16) {
    llvm::Value* lsb = b_.CreateAnd(b_.CreateLShr(bits, 16), c(1));
    llvm::Value* rounded = b_.CreateLShr(b_.CreateAdd(b_.CreateAdd(bits, c(0x7fffu)), lsb), 16);
    llvm::Value* quiet = b_.CreateOr(b_.CreateLShr(bits, 16), c(0x40u));
    return b_.CreateTrunc(b_.CreateSelect(nan, quiet, rounded), i16);
  }
  llvm::Value* sign = b_.CreateAnd(b_.CreateLShr(bits, 16), c(0x8000u));
  llvm::Value* nan_bits = b_.CreateOr(c(0x7e00u), b_.CreateAnd(b_.CreateLShr(a, 13), c(0x3ffu)));
  llvm::Value* lsb = b_.CreateAnd(b_.CreateLShr(a, 13), c(1));
  llvm::Value* r = b_.CreateLShr(b_.CreateAdd(b_.CreateAdd(b_.CreateSub(a, c(kRebias)), c(0xfffu)), lsb), 13);
  llvm::Value* normal = b_.CreateSelect(b_.CreateICmpULT(r, c(0x7c00u)), r, c(0x7c00u));
  llvm::Type* f32 = x->getType();
  llvm::Value* sub = b_.CreateSub(
      b_.CreateBitCast(b_.CreateFAdd(b_.CreateBitCast(a, f32), llvm::ConstantFP::get(f32, 0.5)), i32), c(kHalf));
  llvm::Value* h = b_.CreateSelect(nan, nan_bits, b_.CreateSelect(b_.CreateICmpUGE(a, c(kF16MinNormal)), normal, sub));
  return b_.CreateTrunc(b_.CreateOr(sign, h), i16);
}

llvm::Value* ElementalEmitter::SaturatingFloatToInt(llvm::Value* x, DType in, DType out,
                                                    llvm::Type* to) {
  // Clamp in the float domain, convert, then fix the top (the largest float below 2^bits
  // converts exactly) and NaN (-> 0). Unlike llvm.fpto[su]i.sat this stays vectorised.
  llvm::Type* type = x->getType();
  int bits = DTypeBits(out);
  bool is_signed = IsSignedInt(out);
  double lo = is_signed ? -std::ldexp(1.0, bits - 1) : 0.0;
  double hi = is_signed ? std::ldexp(1.0, bits - 1) : std::ldexp(1.0, bits);
  llvm::Value* too_big = b_.CreateFCmpOGE(x, ConstantOf(type, hi));
  llvm::Value* clamped = b_.CreateSelect(b_.CreateFCmpOLT(x, ConstantOf(type, lo)), ConstantOf(type, lo), x);
  clamped = b_.CreateSelect(too_big, ConstantOf(type, 0), clamped);
  clamped = b_.CreateSelect(b_.CreateFCmpUNO(x, x), ConstantOf(type, 0), clamped);
  llvm::Value* v = is_signed ? b_.CreateFPToSI(clamped, to) : b_.CreateFPToUI(clamped, to);
  unsigned width = to->getScalarSizeInBits();
  llvm::Value* max = llvm::ConstantInt::get(to, is_signed ? llvm::APInt::getSignedMaxValue(width)
                                                          : llvm::APInt::getMaxValue(width));
  return b_.CreateSelect(too_big, max, v);
}

llvm::Value* ElementalEmitter::EmitBinaryOp(Opcode op, DType t, ComparisonDirection dir,
                                            llvm::Value* a, llvm::Value* b) {
  llvm::Type* type = a->getType();
  bool is_float = IsFloat(t), is_signed = IsSignedInt(t);
  switch (op) {
    case Opcode::kAdd: return is_float ? b_.CreateFAdd(a, b) : b_.CreateAdd(a, b);
    case Opcode::kSubtract: return is_float ? b_.CreateFSub(a, b) : b_.CreateSub(a, b);
    case Opcode::kMultiply: return is_float ? b_.CreateFMul(a, b) : b_.CreateMul(a, b);
    case Opcode::kDivide:
    case Opcode::kRemainder: {
      bool div = op == Opcode::kDivide;
      if (is_float) return div ? b_.CreateFDiv(a, b) : b_.CreateFRem(a, b);
      llvm::Value* zero = b_.CreateICmpEQ(b, ConstantOf(type, 0));
      llvm::Value* bad = zero;
      if (is_signed) {
        unsigned bits = type->getScalarSizeInBits();
        llvm::Value* min = llvm::ConstantInt::get(type, llvm::APInt::getSignedMinValue(bits));
        llvm::Value* overflow = b_.CreateAnd(b_.CreateICmpEQ(a, min), b_.CreateICmpEQ(b, AllOnes(type)));
        bad = b_.CreateOr(zero, overflow);
      }
      llvm::Value* safe_b = b_.CreateSelect(bad, ConstantOf(type, 1), b);
      llvm::Value* r = div ? (is_signed ? b_.CreateSDiv(a, safe_b) : b_.CreateUDiv(a, safe_b))
                           : (is_signed ? b_.CreateSRem(a, safe_b) : b_.CreateURem(a, safe_b));
      // a / 1 == INT_MIN and a % 1 == 0 already give the overflow answers.
      return b_.CreateSelect(zero, div ? AllOnes(type) : a, r);
    }
    case Opcode::kPower: {
      if (is_float) return EmitPow(b_, a, b);
      // Square-and-multiply over every bit of the exponent, branch-free.
      unsigned bits = type->getScalarSizeInBits();
      llvm::Value* result = ConstantOf(type, 1);
      llvm::Value* base = a;
      llvm::Value* e = b;
      for (unsigned i = 0; i < bits; ++i) {
        llvm::Value* bit = b_.CreateICmpNE(b_.CreateAnd(e, ConstantOf(type, 1)), ConstantOf(type, 0));
        result = b_.CreateSelect(bit, b_.CreateMul(result, base), result);
        base = b_.CreateMul(base, base);
        e = b_.CreateLShr(e, ConstantOf(type, 1));
      }
      if (is_signed) {
        // Negative exponents: 1 ** n == 1, (-1) ** n == +-1, anything else 0.
        llvm::Value* neg = b_.CreateICmpSLT(b, ConstantOf(type, 0));
        llvm::Value* odd = b_.CreateICmpNE(b_.CreateAnd(b, ConstantOf(type, 1)), ConstantOf(type, 0));
        llvm::Value* minus_one_pow = b_.CreateSelect(odd, ConstantOf(type, -1), ConstantOf(type, 1));
        llvm::Value* neg_result = b_.CreateSelect(
            b_.CreateICmpEQ(a, ConstantOf(type, 1)), ConstantOf(type, 1),
            b_.CreateSelect(b_.CreateICmpEQ(a, ConstantOf(type, -1)), minus_one_pow, ConstantOf(type, 0)));
        result = b_.CreateSelect(neg, neg_result, result);
      }
      return result;
    }
    case Opcode::kMaximum:
    case Opcode::kMinimum: {
      bool max = op == Opcode::kMaximum;
      if (is_float) {
        // NumPy: (a >= b || isnan(a)) ? a : b  (min: <=).
        llvm::Value* keep_a = max ? b_.CreateFCmpOGE(a, b) : b_.CreateFCmpOLE(a, b);
        keep_a = b_.CreateOr(keep_a, b_.CreateFCmpUNO(a, a));
        return b_.CreateSelect(keep_a, a, b);
      }
      if (IsPred(t)) return max ? b_.CreateOr(a, b) : b_.CreateAnd(a, b);
      auto id = max ? (is_signed ? llvm::Intrinsic::smax : llvm::Intrinsic::umax)
                    : (is_signed ? llvm::Intrinsic::smin : llvm::Intrinsic::umin);
      return b_.CreateBinaryIntrinsic(id, a, b);
    }
    case Opcode::kAtan2: return EmitAtan2(b_, a, b);
    case Opcode::kAnd: return b_.CreateAnd(a, b);
    case Opcode::kOr: return b_.CreateOr(a, b);
    case Opcode::kXor: return b_.CreateXor(a, b);
    case Opcode::kShiftLeft:
    case Opcode::kShiftRightLogical:
    case Opcode::kShiftRightArithmetic: {
      unsigned bits = type->getScalarSizeInBits();
      llvm::Value* too_far = b_.CreateICmpUGE(b, ConstantOf(type, bits));
      llvm::Value* amount = b_.CreateAnd(b, ConstantOf(type, bits - 1));
      if (op == Opcode::kShiftLeft) {
        return b_.CreateSelect(too_far, ConstantOf(type, 0), b_.CreateShl(a, amount));
      }
      if (op == Opcode::kShiftRightLogical) {
        return b_.CreateSelect(too_far, ConstantOf(type, 0), b_.CreateLShr(a, amount));
      }
      return b_.CreateSelect(too_far, b_.CreateAShr(a, ConstantOf(type, bits - 1)), b_.CreateAShr(a, amount));
    }
    case Opcode::kCompare: {
      if (is_float) {
        switch (dir) {
          case ComparisonDirection::kEq: return b_.CreateFCmpOEQ(a, b);
          case ComparisonDirection::kNe: return b_.CreateFCmpUNE(a, b);
          case ComparisonDirection::kLt: return b_.CreateFCmpOLT(a, b);
          case ComparisonDirection::kLe: return b_.CreateFCmpOLE(a, b);
          case ComparisonDirection::kGt: return b_.CreateFCmpOGT(a, b);
          case ComparisonDirection::kGe: return b_.CreateFCmpOGE(a, b);
        }
      }
      switch (dir) {
        case ComparisonDirection::kEq: return b_.CreateICmpEQ(a, b);
        case ComparisonDirection::kNe: return b_.CreateICmpNE(a, b);
        case ComparisonDirection::kLt: return is_signed ? b_.CreateICmpSLT(a, b) : b_.CreateICmpULT(a, b);
        case ComparisonDirection::kLe: return is_signed ? b_.CreateICmpSLE(a, b) : b_.CreateICmpULE(a, b);
        case ComparisonDirection::kGt: return is_signed ? b_.CreateICmpSGT(a, b) : b_.CreateICmpUGT(a, b);
        case ComparisonDirection::kGe: return is_signed ? b_.CreateICmpSGE(a, b) : b_.CreateICmpUGE(a, b);
      }
      return nullptr;
    }
    default:
      ThrowUnimplemented("codegen: binary ", OpcodeName(op));
  }
}

}  // namespace fj::codegen
