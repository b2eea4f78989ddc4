// The elemental emitter (see elemental.h). Integer semantics follow XLA and are defined for
// every input: x / 0 == -1, x % 0 == x, INT_MIN / -1 == INT_MIN, shifts by the bit width
// or more give 0 (arithmetic right shifts: the sign), float -> int conversion saturates
// (NaN -> 0). maximum/minimum follow NumPy: NaN propagates, ties return the first operand.
#include "codegen/elemental.h"

#include <algorithm>
#include <cmath>

#include <unordered_set>

#include "analysis/cost_model.h"
#include "codegen/math.h"
#include "llvm/IR/InlineAsm.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/TargetParser/Triple.h"
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
    IndexDim q = strides[d] == 1 ? linear : lanes.DivConst(linear, strides[d]);
    index.dims.push_back(d == outer ? q : lanes.RemConst(q, dims[d]));
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
